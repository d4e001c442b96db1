------------------------------ MODULE MCLive ------------------------------
(***************************************************************************)
(* Must-pass liveness: with fairness on the readers' steps and on          *)
(* free_unused / release_touches, every put object eventually becomes      *)
(* reclaimable (seed protocol, A1-A3).  No symmetry (unsound for           *)
(* liveness).                                                              *)
(* Bounds: N = 3, MAX_OBJ = 2, ID_MAX = 4, 2 keys, 2 readers, 2 issuances. *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2   \* model values

MCForged == {}

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)
=============================================================================
