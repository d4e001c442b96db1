------------------------------ MODULE MCStorage ------------------------------
(***************************************************************************)
(* Main must-pass model: the seed's protocol under its assumptions A1      *)
(* (each issuance read exactly once by each reader), A2 (clear only when   *)
(* quiescent: no read in flight, no delivery pending), A3 (ids do not wrap *)
(* while a handle is outstanding).                                         *)
(* Bounds: ring of N = 4 units; chunks of 1 or 2 units (MAX_OBJ = 2; size  *)
(* 3 exercises put's ValueError); 3 keys; 2 readers; ID_MAX = 5 (> N, so   *)
(* the seed never has ID_MAX live chunks; ids do wrap); at most 4          *)
(* issuances (puts + get_cached).  No forged handles (see MCStorageSmall). *)
(* Weakens: bigger rings, chunks, reader counts; longer runs than 4        *)
(* issuances.  Reader symmetry is sound for invariants.                    *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2, k3   \* model values

MCForged == {}

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)
=============================================================================
