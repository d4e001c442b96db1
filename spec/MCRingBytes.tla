----------------------------- MODULE MCRingBytes -----------------------------
(***************************************************************************)
(* Byte-exact allocator + reclaim target (issue 15, item 1): one cell is   *)
(* one byte, a chunk is `object + 8` bytes (the real 8-byte header; the    *)
(* object includes the 4-byte count), sizes are any byte counts, so a      *)
(* chunk may leave an odd-sized tail at the end of a lap, which the        *)
(* 16-byte-unit models cannot express.                                      *)
(*                                                                         *)
(* put(size) is refimpl's put as the allocator sees it: allocate_buf; on   *)
(* MemoryError free_buf(is_free, ReclaimTarget) then allocate_buf again.   *)
(* is_free is mark_free (environment), so any chunk may be pinned or       *)
(* reclaimable.  MemoryErrorOnlyWithoutRoom: a put raises MemoryError only *)
(* if the chunk would not fit even after reclaiming EVERY reclaimable      *)
(* chunk (FIFO, up to the first pinned one).                               *)
(*                                                                         *)
(* ReclaimTarget is refimpl's 2*(M + 8) - 1 (M = max_object_size); the     *)
(* cfg MCRingBytesOld overrides it with the seed's 2*M and must fail.      *)
(* Bounds: see the cfgs (ring of N bytes, objects of 5..M bytes).          *)
(***************************************************************************)
EXTENDS RingBuffer

CONSTANT M          \* max_object_size in bytes
ASSUME MAssumption == M \in Nat /\ M + 8 <= N

MD_SIZE == 8
NewTarget == 2 * (M + MD_SIZE) - 1
OldTarget == 2 * M
ReclaimTarget == NewTarget

\* free_buf with a target no free loop reaches: every reclaimable chunk.
Everything == N + 1

FreeWith(nbytes) ==
    LET isfree == [i \in DOMAIN metadata |-> i \in marked]
        sz     == [i \in DOMAIN metadata |-> hdr_size[metadata[i] % N]]
    IN  FreeBuf(data_buffer_start, data_buffer_end, monotonic_id_start,
                metadata, isfree, sz, nbytes)

\* storage.put's allocation: allocate, else reclaim ReclaimTarget bytes and
\* allocate again.  `room`: would the chunk fit after reclaiming everything?
put(size) ==
    LET a1   == AllocAddr(data_buffer_end, data_buffer_start, metadata, size)
        r    == FreeWith(ReclaimTarget)
        a2   == AllocAddr(r.end, r.start, r.md, size)
        all  == FreeWith(Everything)
        room == AllocAddr(all.end, all.start, all.md, size) # NoAddr
        id   == monotonic_id_end
        \* the ring after the optional reclaim, and the address
        S    == IF a1 # NoAddr
                THEN [start |-> data_buffer_start, end |-> data_buffer_end,
                      ids |-> monotonic_id_start, md |-> metadata]
                ELSE r
        a    == IF a1 # NoAddr THEN a1 ELSE a2
        ch   == chunks \ Reclaimed(chunks, metadata, S.md)
    IN  /\ data_buffer_start' = S.start
        /\ monotonic_id_start' = S.ids
        /\ IF a = NoAddr
           THEN /\ data_buffer_end' = S.end
                /\ metadata' = S.md
                /\ marked' = marked \cap DOMAIN S.md
                /\ chunks' = ch
                /\ last_action' = [name |-> "put", size |-> size,
                                   outcome |-> "MemoryError", room |-> room]
                /\ UNCHANGED <<monotonic_id_end, hdr_size>>
           ELSE /\ data_buffer_end' = a + size
                /\ monotonic_id_end' = NextId(id)
                /\ metadata' = Extend(S.md, id, a)
                /\ hdr_size' = [hdr_size EXCEPT ![a % N] = size]
                /\ marked' = (marked \cap DOMAIN S.md) \ {id}
                /\ chunks' = ch \cup {[id |-> id, addr |-> a, size |-> size]}
                /\ last_action' = [name |-> "put", size |-> size,
                                   outcome |-> "ok", room |-> room]

NextBytes ==
    \/ \E s \in Sizes : put(s)
    \/ \E i \in 0..(ID_MAX - 1) : mark_free(i)
    \/ clear

SpecBytes == Init /\ [][NextBytes]_vars

MemoryErrorOnlyWithoutRoom ==
    (last_action.name = "put" /\ last_action.outcome = "MemoryError")
        => ~last_action.room

\* Sanity (the check is not vacuous): a put that succeeded had room.
SuccessOnlyWithRoom ==
    (last_action.name = "put" /\ last_action.outcome = "ok") => last_action.room
=============================================================================
