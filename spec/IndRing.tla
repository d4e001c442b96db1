------------------------------- MODULE IndRing -------------------------------
(***************************************************************************)
(* Inductiveness of the allocator's LiveDisjoint (RingBuffer.tla), checked *)
(* with TLC as the TLA+ community does it: INIT is every state of          *)
(* TypeOk /\ Inv over a bounded domain (IndInit), NEXT is the allocator's  *)
(* Next, Inv is the invariant, and the constraint OneStep stops TLC after  *)
(* one step.  TLC passing means: from EVERY state of that size where Inv   *)
(* holds (not only the reachable ones), every step keeps Inv.              *)
(*                                                                         *)
(* LiveDisjoint alone is not inductive (TLC: a state with an empty         *)
(* metadata but live chunks, or a chunk past data_buffer_end, lets         *)
(* allocate_buf overlap).  IndLiveDisjoint adds what the allocator relies  *)
(* on: the metadata names exactly the live chunks (MetadataAgrees), their  *)
(* ids are distinct, the header at a chunk's cell holds its size, the      *)
(* chunks sit in FIFO order inside [start, end) (FifoOrder, SpanBound), no *)
(* chunk crosses the end of the ring, and marked ids are live.             *)
(*                                                                         *)
(* IndInit enumerates a superset of TypeOk /\ IndLiveDisjoint: the chunks  *)
(* are generated from metadata and hdr_size (MetadataAgrees and            *)
(* HeadersAgree fix them), and last_action, which no action reads, is the  *)
(* initial one.  Every state TLC starts from is then filtered by the       *)
(* invariant itself.                                                       *)
(***************************************************************************)
EXTENDS RingBuffer

\* The header at each live chunk's cell holds its size (free_buf reads it).
HeadersAgree == \A c \in chunks : hdr_size[c.addr % N] = c.size

\* No chunk crosses the physical end of the ring (allocate_buf wraps first).
InsideRing == \A c \in chunks : (c.addr % N) + c.size <= N

\* With no live chunk the id range is empty: the next id is the oldest's
\* (free_buf and clear leave them equal).  Without it, FifoOrder allows
\* an empty ring whose next chunk's id is not monotonic_id_start.
EmptyIdsMeet == DOMAIN metadata = {} => monotonic_id_start = monotonic_id_end

\* The strengthening: LiveDisjoint and what makes it inductive.
IndLiveDisjoint ==
    /\ TypeOk
    /\ LiveDisjoint
    /\ LiveIdsDistinct
    /\ MetadataAgrees
    /\ HeadersAgree
    /\ InsideRing
    /\ SpanBound
    /\ FifoOrder
    /\ EmptyIdsMeet
    /\ IdRangeUnambiguous

\* Deliberately weakened: without FifoOrder (where the chunks sit relative
\* to start, end and each other): the check must fail.
WeakLiveDisjoint ==
    /\ TypeOk
    /\ LiveDisjoint
    /\ LiveIdsDistinct
    /\ MetadataAgrees
    /\ HeadersAgree
    /\ InsideRing
    /\ SpanBound
    /\ IdRangeUnambiguous

\* Partial functions from D to R.
PartialFns(D, R) == UNION {[S -> R] : S \in SUBSET D}

ChunksOf(md, hs) ==
    {[id |-> i, addr |-> md[i], size |-> hs[md[i] % N]] : i \in DOMAIN md}

\* Every state of the bounded domain (TypeOk's ranges), filtered as early
\* as it can be by conjuncts of the invariant under test (PRE: on the
\* pointers, MD: on the metadata), then by the invariant INV itself.
BoundedInit(PRE, MD, INV) ==
    /\ data_buffer_start \in 0..(N - 1)
    /\ data_buffer_end \in 0..(2 * N)
    /\ PRE
    /\ monotonic_id_start \in 0..(ID_MAX - 1)
    /\ monotonic_id_end \in 0..(ID_MAX - 1)
    /\ metadata \in PartialFns(0..(ID_MAX - 1), 0..(2 * N - 1))
    /\ MD
    /\ hdr_size \in [Cells -> 0..N]
    /\ chunks = ChunksOf(metadata, hdr_size)
    /\ marked \in SUBSET DOMAIN metadata
    /\ last_action = [name |-> "init", outcome |-> "ok"]
    /\ INV

FifoIds ==
    LET L == Cardinality(DOMAIN metadata)
    IN  /\ L < ID_MAX
        /\ DOMAIN metadata = {(monotonic_id_start + k) % ID_MAX : k \in 0..(L - 1)}
        /\ L > 0 => NextId((monotonic_id_start + L - 1) % ID_MAX) = monotonic_id_end
        /\ L = 0 => /\ data_buffer_start = 0 /\ data_buffer_end = 0
                   /\ monotonic_id_start = monotonic_id_end

IndInit == BoundedInit(SpanBound, FifoIds, IndLiveDisjoint)
WeakInit == BoundedInit(SpanBound, IdRangeUnambiguous, WeakLiveDisjoint)

\* One step from the initial states, no further.
OneStep == TLCGet("level") < 1
=============================================================================
