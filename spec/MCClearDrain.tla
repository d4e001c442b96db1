------------------------------ MODULE MCClearDrain ------------------------------
(***************************************************************************)
(* H-ClearDrain (must FAIL ReadsReturnPutValue): clear() with no read in   *)
(* flight but deliveries still pending (requests draining, which the       *)
(* seed's clear() comment says the increasing ids protect).  A pending     *)
(* read that BEGINS after the clear and before address 0 is reused passes  *)
(* the id check (clear leaves memory alone); the next put reuses address 0 *)
(* under it.                                                               *)
(* Bounds: as MCStorage with 2 keys and 3 issuances.                       *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2   \* model values

MCForged == {}

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)
=============================================================================
