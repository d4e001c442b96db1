------------------------------ MODULE MCRingLarge ------------------------------
(***************************************************************************)
(* Larger allocator model for make check (must pass). Bounds: N = 5 units, *)
(* chunk sizes 1 and 3, ID_MAX = 6 (> N: ids wrap, never collide), free    *)
(* targets 1, 3 and N: 104,075 distinct states, depth 30. Weakens: rings   *)
(* over 5 cells, chunks of 2, 4 and 5 cells (size 2 is in MCRingFixed and  *)
(* the storage models; sizes 1..3 on N = 5 is 555,413 states, over the     *)
(* make check budget).                                                     *)
(***************************************************************************)
EXTENDS RingBuffer
=============================================================================
