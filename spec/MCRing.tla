------------------------------- MODULE MCRing -------------------------------
(***************************************************************************)
(* The one model module of the allocator, RingBuffer.tla: every ring       *)
(* model (MCRing, MCRingLarge, MCRingIdCollision, MCRingFixed) is a cfg on *)
(* it; the cfg's comments say what its bounds weaken.  MCRingBytes.tla is *)
(* a different spec on the same allocator (byte-exact put).               *)
(***************************************************************************)
EXTENDS RingBuffer
=============================================================================
