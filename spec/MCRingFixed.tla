------------------------------ MODULE MCRingFixed ------------------------------
(***************************************************************************)
(* Allocator with fix F1 (must pass): same bounds as MCRingIdCollision     *)
(* (ID_MAX = 3 <= N = 4) but allocate_buf raises MemoryError once ID_MAX   *)
(* - 1 chunks are live.                                                    *)
(***************************************************************************)
EXTENDS RingBuffer
=============================================================================
