------------------------------ MODULE MCStorageFixedSmall ------------------------------
(***************************************************************************)
(* Small must-pass model of the FIXED protocol (for --quick): as           *)
(* MCStorageFixed.                                                         *)
(* Bounds: N = 3, MAX_OBJ = 2, ID_MAX = 3, 2 keys, 2 readers, 2 issuances. *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2   \* model values

MCForged == {<<k2, 0, 0>>}

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)
=============================================================================
