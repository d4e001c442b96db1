------------------------- MODULE StorageProperties -------------------------
(***************************************************************************)
(* What the models check: TypeOk, the invariants, the action property      *)
(* FreeReturnsWhatItRemoves, the refinement of AbstractCache.tla and       *)
(* the liveness property EveryPutReclaimable.                              *)
(***************************************************************************)
EXTENDS StorageSignatures

Handles == Keys \X Nat \X Nat

TypeOk ==
    /\ data_buffer_start \in 0..(N - 1)
    /\ data_buffer_end \in 0..(2 * N)
    /\ monotonic_id_start \in 0..(ID_MAX - 1)
    /\ monotonic_id_end \in 0..(ID_MAX - 1)
    /\ DOMAIN metadata \subseteq 0..(ID_MAX - 1)
    /\ DOMAIN key_index \subseteq Keys
    /\ DOMAIN writer_flag \subseteq 0..(ID_MAX - 1)
    /\ touched \subseteq 0..(ID_MAX - 1)
    /\ hdr_id \in [Cells -> {NoId} \cup 0..(ID_MAX - 1)]
    /\ hdr_size \in [Cells -> 0..N]
    /\ count \in [Cells -> Nat]
    /\ payload \in [Cells -> Keys \cup {NoKey, Corrupt}]
    /\ DOMAIN issued \subseteq Handles
    /\ \A i \in DOMAIN metadata : metadata[i] \in 0..(2 * N - 1)
    /\ \A k \in DOMAIN key_index :
          key_index[k] \in (0..(2 * N - 1)) \X (0..(ID_MAX - 1))
    /\ DOMAIN id_index \subseteq 0..(ID_MAX - 1)
    /\ \A i \in DOMAIN id_index : id_index[i] \in Keys
    /\ \A i \in DOMAIN writer_flag : writer_flag[i] \in 1..MaxIssues
    /\ \A h \in DOMAIN issued : issued[h] \in 1..N
    /\ \A c \in chunks : /\ c.id \in 0..(ID_MAX - 1)
                         /\ c.addr \in 0..(2 * N - 1)
                         /\ c.size \in 1..N
                         /\ c.key \in Keys
                         /\ c.reads \in Nat
    /\ last_action.name \in {"init", "put", "get_cached", "touch",
                             "release_touches", "free_unused", "clear",
                             "get_begin", "get_copy", "get_check", "get_end",
                             "drop_delivery"}
    /\ \A r \in Readers :
          /\ \A h \in DOMAIN inbox[r] : inbox[r][h] \in 1..MaxIssues
          /\ \A h \in DOMAIN revoked[r] : revoked[r][h] \in 1..MaxIssues
          /\ rd[r].h \in Handles \cup {NoHandle}
          /\ rd[r].pos \in Cells
          /\ rd[r].size \in 0..N
          /\ \A i \in DOMAIN rd[r].val :
                rd[r].val[i] \in Keys \cup {NoKey, Corrupt}
    /\ \A r \in Readers : /\ DOMAIN inbox[r] \subseteq Handles
                          /\ DOMAIN revoked[r] \subseteq Handles
                          /\ ROTATE \/ revoked[r] = EmptyFn
                          /\ rd[r].st \in {"idle", "open", "copied", "failed",
                                         "checked", "checked_failed"}
    /\ nissued \in 0..MaxIssues
    /\ rotate_at \in {NoId} \cup 0..(ID_MAX - 1)
    /\ ROTATE \/ rotate_at = NoId

CellsOf(c) == (c.addr % N)..((c.addr % N) + c.size - 1)

\* Live chunks never overlap physically.
LiveDisjoint ==
    \A c1, c2 \in chunks : c1 # c2 => CellsOf(c1) \cap CellsOf(c2) = {}

\* Live chunk ids are distinct.
LiveIdsDistinct ==
    \A c1, c2 \in chunks : c1 # c2 => c1.id # c2.id

\* [monotonic_id_start, monotonic_id_end) is unambiguous (< ID_MAX live).
IdRangeUnambiguous == Cardinality(DOMAIN metadata) < ID_MAX

\* Live chunks in FIFO order (RingBuffer.tla's FifoOrder on these variables).
FifoOrder ==
    LET L == Cardinality(DOMAIN metadata)
        id(k) == (monotonic_id_start + k) % ID_MAX
        a(k) == data_buffer_start
                + ((metadata[id(k)] - data_buffer_start) % N)
        sz(k) == hdr_size[metadata[id(k)] % N]
    IN  IF L = 0
        THEN data_buffer_start = 0 /\ data_buffer_end = 0
        ELSE /\ DOMAIN metadata = {id(k) : k \in 0..(L - 1)}
             /\ Ring!NextId(id(L - 1)) = monotonic_id_end
             /\ a(0) = data_buffer_start
             /\ \A k \in 0..(L - 2) : a(k) + sz(k) <= a(k + 1)
             /\ a(L - 1) + sz(L - 1) = data_buffer_end
             /\ data_buffer_end - data_buffer_start <= N

\* The writer's key_index, id_index, writer_flag, touched and the ring's
\* metadata describe the same chunks, and those are the unreclaimed ones.
WriterMapsAgree ==
    /\ DOMAIN metadata = {c.id : c \in chunks}
    /\ \A c \in chunks : metadata[c.id] = c.addr
    /\ DOMAIN id_index = DOMAIN metadata
    /\ DOMAIN writer_flag = DOMAIN metadata
    /\ \A i \in DOMAIN writer_flag : writer_flag[i] >= 1
    /\ touched \subseteq DOMAIN metadata
    /\ \A c \in chunks : /\ c.key \in DOMAIN key_index
                         /\ key_index[c.key] = <<c.addr, c.id>>
                         /\ id_index[c.id] = c.key
    /\ DOMAIN key_index = {c.key : c \in chunks}

\* Every live chunk's memory is what put wrote: header, payload of its key.
MemoryIntact ==
    \A c \in chunks :
        /\ hdr_id[c.addr % N] = c.id
        /\ hdr_size[c.addr % N] = c.size
        /\ \A x \in CellsOf(c) : payload[x] = c.key

\* Every completed read returned exactly the value put under the handle's
\* key by the put that issued the handle: no stale, torn or foreign value.
ReadsReturnPutValue ==
    (last_action.name = "get_end" /\ last_action.outcome = "ok")
        => /\ last_action.handle \in DOMAIN issued
           /\ last_action.value = Value(last_action.handle[1],
                                        issued[last_action.handle])

\* The copy window (no torn read): while a reader has opened a chunk and
\* not yet copied it (get_begin .. get_copy), no put writes a cell the
\* reader will copy.  Only put writes payload and headers (free_unused and
\* clear move pointers only), and under A1 a reader's handle pins its chunk
\* (OutstandingPinned) so free_unused cannot hand its cells to a put; a
\* clear() during a read drops that pin (CLEAR_WHEN = "any": F2 must then
\* reject the read at get_end).
ReadCells(r) == rd[r].pos..(rd[r].pos + rd[r].size - 1)
PutCells == (last_action.handle[2] % N)..((last_action.handle[2] % N)
                                          + last_action.size - 1)
CopyWindowUntouched ==
    (last_action.name = "put" /\ last_action.outcome = "ok")
        => \A r \in Readers : rd[r].st = "open" => ReadCells(r) \cap PutCells = {}

\* The count in a live chunk's header never exceeds the increments made by
\* readers whose handle named that chunk.
CountsSound ==
    \A c \in chunks : count[c.addr % N] <= c.reads

\* The count of a live chunk is exactly the number of completed reads of
\* it (increments by readers whose handle named it): no stray increment
\* landed on it and none was lost (stronger than CountsSound).
CountsExact ==
    \A c \in chunks : count[c.addr % N] = c.reads

\* Every outstanding handle pins its chunk: while a delivery of a live
\* chunk's handle is pending, or a read of it is in flight, the chunk is
\* not reclaimable (so free_unused cannot reuse it under the reader).
Names(h, c) == c.id = h[3] /\ c.addr = h[2]
OutstandingPinned ==
    \A c \in chunks :
        (\/ \E r \in Readers : \E h \in DOMAIN inbox[r] : Names(h, c)
         \/ \E r \in Readers : rd[r].st # "idle" /\ Names(rd[r].h, c))
        => ~IsFreeIn(Cur, c.id)

\* free_unused (alone or inside put) returns exactly the ids it removed
\* from the ring's metadata, and the writer's maps forget exactly those
\* (an action property: check it under PROPERTIES).
FreeReturnsWhatItRemoves ==
    [][/\ last_action'.name = "free_unused"
         => {last_action'.freed[i] : i \in DOMAIN last_action'.freed}
            = DOMAIN metadata \ DOMAIN metadata'
       /\ last_action'.name \in {"free_unused", "put"}
         => DOMAIN id_index \ DOMAIN id_index' = DOMAIN metadata \ DOMAIN metadata'
      ]_vars

\* put raises MemoryError only when some live chunk is really not reclaimable
\* (the 2*max_object_size free target always leaves room otherwise).
MemoryErrorOnlyWhenPinned ==
    (last_action.name = "put" /\ last_action.outcome = "MemoryError")
        => \E i \in DOMAIN metadata : ~IsFreeIn(Cur, i)

-----------------------------------------------------------------------------
(* Refinement: Spec => AbstractCache!Spec under this mapping.              *)

AC == INSTANCE AbstractCache WITH
        cache <- [h \in DOMAIN issued |-> Value(h[1], issued[h])],
        got <- IF last_action.name = "get_end" /\ last_action.outcome = "ok"
               THEN <<last_action.handle, last_action.value>>
               ELSE <<>>
AbstractSpec == AC!Spec

-----------------------------------------------------------------------------
(* Liveness.                                                               *)

Reclaimable(i) == i \notin DOMAIN metadata \/ IsFreeIn(Cur, i)

\* If readers keep reading, every put object eventually becomes reclaimable.
EveryPutReclaimable ==
    \A i \in 0..(ID_MAX - 1) : (i \in DOMAIN metadata) ~> Reclaimable(i)

=============================================================================
