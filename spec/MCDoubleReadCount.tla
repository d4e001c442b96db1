------------------------------ MODULE MCDoubleReadCount ------------------------------
(***************************************************************************)
(* H-DoubleRead, second face (must FAIL CountsSound): the late increment   *)
(* of the reader whose chunk was reclaimed lands on the count of the new   *)
(* chunk at the same address, which then looks read by a reader that never *)
(* read it (premature free of the new chunk).                              *)
(* Bounds: as MCDoubleRead.                                                *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2   \* model values

MCForged == {}

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)
=============================================================================
