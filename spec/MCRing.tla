------------------------------- MODULE MCRing -------------------------------
(***************************************************************************)
(* Allocator model, small enough to dump the whole state graph            *)
(* (-dump dot,actionlabels) for edge-covering replay.                      *)
(*                                                                         *)
(* Bounds: N = 4 units (64 bytes), chunk sizes 1 and 3 units, ID_MAX = 5, *)
(* free targets 2 units and N (None).  What they weaken: rings of more   *)
(* than 4 cells, chunks of 2 or 4 cells are not explored; ID_MAX = 5 > N *)
(* means ids wrap (the graph is cyclic) but never collide (at most N live *)
(* chunks), so H-IdCollision is out of this model (see MCRingIdCollision). *)
(* No bound on the number of steps: the state space is finite.             *)
(***************************************************************************)
EXTENDS RingBuffer
=============================================================================
