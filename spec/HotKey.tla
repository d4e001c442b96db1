------------------------------- MODULE HotKey -------------------------------
(***************************************************************************)
(* Liveness of eviction under a hot key (issue 26): can get_cached on a    *)
(* key handed out again and again keep put failing for ever, although      *)
(* the readers read every delivery?                                        *)
(*                                                                         *)
(* ShmObjectStorage.tla bounds the issuances (MaxIssues), so it cannot     *)
(* express "again and again"; this module abstracts it to what eviction    *)
(* depends on.  The ring holds at most CAP chunks in FIFO order (chunks    *)
(* of one size: room means fewer than CAP chunks); a chunk is a record of  *)
(* its pending deliveries per reader (writer_flag*R - count, split per     *)
(* reader) and whether its key is still cached there.  put runs            *)
(* free_unused (frees chunks from the oldest while the oldest has no       *)
(* pending delivery: the is_free check) and appends the new chunk, or      *)
(* fails (MemoryError).  get_cached(i) delivers chunk i's handle to every  *)
(* reader again (writer_flag + 1).  Readers read their deliveries in any   *)
(* order, but each one eventually.  Pending deliveries are bounded by      *)
(* MaxPending per reader and chunk (a bounded request queue); the writer   *)
(* is not constrained.                                                     *)
(*                                                                         *)
(* RENEW (a design fix, not in the seed or refimpl): get_cached never      *)
(* hands out the oldest chunk again; it re-puts the value at the head of   *)
(* the ring (when there is room) and the key moves there, or reports a     *)
(* miss.  Then the oldest chunk only drains.                               *)
(***************************************************************************)
EXTENDS Naturals, Sequences

CONSTANTS CAP, Readers, MaxPending, RENEW

VARIABLES ring, last

vars == <<ring, last>>

Idle == [r \in Readers |-> 0]
Once == [r \in Readers |-> 1]
Chunk(p) == [pend |-> p, cached |-> TRUE]
Pinned(c) == \E r \in Readers : c.pend[r] > 0

\* free_unused: drop chunks from the oldest while the oldest is free.
RECURSIVE FreeFromOldest(_)
FreeFromOldest(s) ==
    IF s # <<>> /\ ~Pinned(Head(s)) THEN FreeFromOldest(Tail(s)) ELSE s

Init == ring = <<>> /\ last = "init"

put ==
    LET s == FreeFromOldest(ring)
    IN  IF Len(s) < CAP
        THEN ring' = Append(s, Chunk(Once)) /\ last' = "put_ok"
        ELSE ring' = s /\ last' = "put_failed"

Deliverable(i) ==
    /\ ring[i].cached
    /\ \A r \in Readers : ring[i].pend[r] < MaxPending

get_cached(i) ==
    /\ Deliverable(i)
    /\ IF RENEW /\ i = 1
       THEN LET s == FreeFromOldest(ring)
                dropped == Len(ring) - Len(s)
            IN  IF dropped > 0 \/ Len(s) = CAP
                \* the oldest was free (freed with it) or no room: a miss
                THEN ring' = s /\ last' = "miss"
                ELSE /\ ring' = Append([s EXCEPT ![1].cached = FALSE], Chunk(Once))
                     /\ last' = "renew"
       ELSE /\ ring' = [ring EXCEPT ![i].pend = [r \in Readers |-> @[r] + 1]]
            /\ last' = "get_cached"

read(r, i) ==
    /\ ring[i].pend[r] > 0
    /\ ring' = [ring EXCEPT ![i].pend[r] = @ - 1]
    /\ last' = "read"

ReaderStep(r) == \E i \in 1..Len(ring) : read(r, i)
ReadOldest(r) == ring # <<>> /\ read(r, 1)

Next ==
    \/ put
    \/ \E i \in 1..Len(ring) : get_cached(i)
    \/ \E r \in Readers : ReaderStep(r)

\* Readers keep reading (weak fairness per reader), and none leaves a
\* delivery of the oldest chunk unread for ever (it could otherwise read
\* only the hot chunk's deliveries); the writer is free.
FairSpec == Init /\ [][Next]_vars
            /\ \A r \in Readers : WF_vars(ReaderStep(r)) /\ WF_vars(ReadOldest(r))

TypeOk ==
    /\ Len(ring) <= CAP
    /\ \A i \in 1..Len(ring) : ring[i].pend \in [Readers -> 0..MaxPending]
    /\ last \in {"init", "put_ok", "put_failed", "get_cached", "read", "miss",
                 "renew"}

\* A writer that keeps calling put does not keep failing for ever.
PutNotStarved == []<>(last = "put_failed") => []<>(last = "put_ok")
=============================================================================
