------------------------------ MODULE MCStorageFixed ------------------------------
(***************************************************************************)
(* Must-pass model of the FIXED protocol (F1, F2, F3) with clear() allowed *)
(* at any time, even while reads are in flight or deliveries pending (F2's *)
(* re-check turns those reads into "stale"), and ID_MAX = 3 < N = 4 so     *)
(* that without F1 the ring could hold ID_MAX live chunks (H-IdCollision). *)
(* Keeps A1 and A3 (not closable).  get_end is one atomic step (see spec). *)
(* Bounds: N = 4, MAX_OBJ = 2, sizes 1..2, 2 keys, 2 readers, 3 issuances. *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2   \* model values

MCForged == {<<k2, 0, 0>>}

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)
=============================================================================
