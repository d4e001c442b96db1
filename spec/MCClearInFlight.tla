------------------------------ MODULE MCClearInFlight ------------------------------
(***************************************************************************)
(* H-ClearInFlight (must FAIL ReadsReturnPutValue): clear() while a read   *)
(* is in flight, then put reuses address 0: the reader copies the new key. *)
(* Bounds: as MCStorage with 2 keys and 3 issuances.                       *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2   \* model values

MCForged == {}

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)
=============================================================================
