------------------------------ MODULE MCRingIdCollision ------------------------------
(***************************************************************************)
(* H-IdCollision in the allocator alone (must FAIL IdRangeUnambiguous):    *)
(* ID_MAX = 3 <= N = 4, so the ring can hold ID_MAX live chunks; then      *)
(* monotonic_id_start = monotonic_id_end as for an empty ring, the next    *)
(* allocation overwrites metadata[id] of a live chunk and free_buf         *)
(* returns an empty id range after freeing them all. Bounds: N = 4, sizes  *)
(* 1..2, free targets 1 and N.                                             *)
(***************************************************************************)
EXTENDS RingBuffer
=============================================================================
