------------------------------ MODULE MCRingLarge ------------------------------
(***************************************************************************)
(* Larger allocator model for make check (must pass). Bounds: N = 5 units, *)
(* chunk sizes 1..3, ID_MAX = 6 (> N: ids wrap, never collide), free       *)
(* targets 1, 3 and N. Weakens: rings over 5 cells, chunks of 4..5 cells.  *)
(***************************************************************************)
EXTENDS RingBuffer
=============================================================================
