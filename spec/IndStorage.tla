----------------------------- MODULE IndStorage -----------------------------
(***************************************************************************)
(* Inductiveness of the counting invariants (CountsExact, and CountsSound  *)
(* which it implies) of the FIXED storage protocol, checked with TLC as    *)
(* IndRing.tla does for the allocator: INIT is every state of the bounded  *)
(* domain where TypeOk /\ IndCounts holds, NEXT is the protocol's Next,    *)
(* and OneStep stops TLC after one step.                                   *)
(*                                                                         *)
(* CountsExact alone is not inductive.  IndCounts adds what the counts     *)
(* rely on: the ring's shape (LiveDisjoint, FifoOrder, EmptyIdsMeet,       *)
(* InsideRing: a put never writes over a live chunk's count), the          *)
(* writer's maps and memory (WriterMapsAgree, MemoryIntact: the header at  *)
(* a live chunk's cell is its own; ChunksIssued: get_cached re-issues a    *)
(* live chunk's signed handle), where a reader stands (ReadersAt: an       *)
(* open read holds an issued handle and the cell its address names), and   *)
(* HandlesUnambiguous: no outstanding handle carries a live chunk's id     *)
(* with another address (what A3 guarantees; without it F2's re-check      *)
(* passes for a handle of an older lap and the increment lands on a chunk  *)
(* it does not name: WeakCounts drops it and fails).                       *)
(*                                                                         *)
(* IndInit enumerates a superset of TypeOk /\ IndCounts: the writer's maps *)
(* and the ring's metadata are derived from `chunks` (WriterMapsAgree      *)
(* fixes them), counts and reads are bounded by MaxIssues * R, handles'    *)
(* addresses by 2N and ids by ID_MAX (as metadata's), an open read's       *)
(* value is empty and a copied one's as long as its size (get_copy         *)
(* writes it whole), and last_action, which Next never reads, is the       *)
(* initial one.  These bounds are the domain; the rest is TypeOk /\ Inv.   *)
(* BoundedInit binds each variable where it is first read and filters by   *)
(* Inv's parts as soon as their variables are bound (TLC enumerates INIT   *)
(* conjunct by conjunct): fewer candidates, the same set (Inv comes last). *)
(***************************************************************************)
EXTENDS MCStorage

Bnd == MaxIssues * R
HandleU == Keys \X (0..(2 * N - 1)) \X (0..(ID_MAX - 1))
PartialFns(D, V) == UNION {[S -> V] : S \in SUBSET D}
ChunkU == [id : 0..(ID_MAX - 1), addr : 0..(2 * N - 1), size : Sizes \cap 1..MAX_OBJ,
           key : Keys, reads : 0..Bnd]
ValU(s) == [1..s -> Keys \cup {NoKey, Corrupt}]
RdU(H) ==
    {IdleRead}
    \cup [st : {"open"}, h : H, pos : Cells, size : 0..N, val : {<<>>}]
    \cup UNION {[st : {"copied"}, h : H, pos : Cells, size : {s}, val : ValU(s)]
                : s \in 0..N}

EmptyIdsMeet == DOMAIN metadata = {} => monotonic_id_start = monotonic_id_end
InsideRing == \A c \in chunks : (c.addr % N) + c.size <= N

\* An open or copied read holds an issued handle and the cell it names.
ReadersAt ==
    \A r \in Readers :
        /\ rd[r].st \in {"idle", "open", "copied"}
        /\ rd[r].st # "idle" => /\ rd[r].h \in DOMAIN issued
                                /\ rd[r].pos = rd[r].h[2] % N

RECURSIVE SumOver(_, _)
SumOver(b, D) == IF D = {} THEN 0
                 ELSE LET x == CHOOSE y \in D : TRUE IN b[x] + SumOver(b, D \ {x})
BagSize(b) == SumOver(b, DOMAIN b)

\* Deliveries are of issued handles; no more handles, and no reader holds
\* more deliveries (pending, revoked or being read), than issuances.
DeliveriesIssued ==
    /\ Cardinality(DOMAIN issued) <= nissued
    /\ \A i \in DOMAIN writer_flag : writer_flag[i] <= nissued
    /\ \A r \in Readers :
          /\ DOMAIN inbox[r] \cup DOMAIN revoked[r] \subseteq DOMAIN issued
          /\ BagSize(inbox[r]) + BagSize(revoked[r])
             + (IF rd[r].st # "idle" THEN 1 ELSE 0) <= nissued

\* Every live chunk's handle was issued, with its size (get_cached
\* re-issues it).
ChunksIssued ==
    \A c \in chunks : /\ <<c.key, c.addr, c.id>> \in DOMAIN issued
                     /\ issued[<<c.key, c.addr, c.id>>] = c.size

\* A3's consequence: an outstanding handle with a live chunk's id names it.
HandlesUnambiguous ==
    \A c \in chunks, h \in Outstanding : h[3] = c.id => h[2] = c.addr

IndCore ==
    /\ TypeOk
    /\ LiveDisjoint
    /\ LiveIdsDistinct
    /\ IdRangeUnambiguous
    /\ FifoOrder
    /\ EmptyIdsMeet
    /\ InsideRing
    /\ WriterMapsAgree
    /\ MemoryIntact
    /\ ReadersAt
    /\ DeliveriesIssued
    /\ ChunksIssued
    /\ CountsExact

IndCounts == IndCore /\ HandlesUnambiguous

\* Deliberately weakened: without HandlesUnambiguous (must fail).
WeakCounts == IndCore

ById(i) == CHOOSE c \in chunks : c.id = i
ByKey(k) == CHOOSE c \in chunks : c.key = k

\* Parts of MemoryIntact and DeliveriesIssued (each implied by the whole),
\* for BoundedInit to filter by as soon as their variables are bound.
HeadersIntact ==
    \A c \in chunks : /\ hdr_id[c.addr % N] = c.id
                     /\ hdr_size[c.addr % N] = c.size
InboxWithin == \A r \in Readers : BagSize(inbox[r]) <= nissued
RevokedWithin ==
    \A r \in Readers : BagSize(inbox[r]) + BagSize(revoked[r]) <= nissued

\* INV, checked last, makes the set exact; the filters before it only
\* prune (touched and rotate_at, which no filter reads, are bound last).
BoundedInit(INV) ==
    /\ chunks \in SUBSET ChunkU
    /\ Cardinality(chunks) < ID_MAX
    /\ LiveDisjoint /\ LiveIdsDistinct /\ InsideRing
    /\ \A c1, c2 \in chunks : c1 # c2 => c1.key # c2.key
    /\ metadata = [i \in {c.id : c \in chunks} |-> ById(i).addr]
    /\ id_index = [i \in DOMAIN metadata |-> ById(i).key]
    /\ key_index = [k \in {c.key : c \in chunks} |-> <<ByKey(k).addr, ByKey(k).id>>]
    /\ nissued \in 0..MaxIssues   \* bound where first read
    /\ writer_flag \in [DOMAIN metadata -> 1..MaxIssues]
    /\ \A i \in DOMAIN writer_flag : writer_flag[i] <= nissued
    /\ monotonic_id_start \in 0..(ID_MAX - 1)
    /\ monotonic_id_end \in 0..(ID_MAX - 1)
    /\ EmptyIdsMeet
    /\ hdr_id \in [Cells -> {NoId} \cup 0..(ID_MAX - 1)]
    /\ hdr_size \in [Cells -> 0..N]
    /\ HeadersIntact   \* filters as soon as its variables are bound
    /\ data_buffer_start \in 0..(N - 1)   \* bound where first read
    /\ data_buffer_end \in 0..(2 * N)
    /\ FifoOrder
    /\ count \in [Cells -> 0..Bnd]
    /\ CountsExact     \* filters as soon as its variables are bound
    /\ payload \in [Cells -> Keys \cup {NoKey, Corrupt}]
    /\ MemoryIntact
    /\ issued \in PartialFns(HandleU, 1..N)
    /\ Cardinality(DOMAIN issued) <= nissued
    /\ ChunksIssued
    /\ inbox \in [Readers -> PartialFns(DOMAIN issued, 1..MaxIssues)]
    /\ InboxWithin     \* filters as soon as its variables are bound
    /\ revoked \in [Readers -> IF ROTATE THEN PartialFns(DOMAIN issued, 1..MaxIssues)
                                          ELSE {EmptyFn}]
    /\ RevokedWithin   \* filters as soon as its variables are bound
    /\ rd \in [Readers -> RdU(DOMAIN issued)]
    /\ ReadersAt /\ DeliveriesIssued   \* filters as soon as its variables are bound
    /\ rotate_at \in IF ROTATE THEN {NoId} \cup 0..(ID_MAX - 1) ELSE {NoId}
    /\ touched \in SUBSET DOMAIN metadata
    /\ last_action = [name |-> "init", outcome |-> "ok"]
    /\ INV

IndInit == BoundedInit(IndCounts)
WeakInit == BoundedInit(WeakCounts)

OneStep == TLCGet("level") < 1
=============================================================================
