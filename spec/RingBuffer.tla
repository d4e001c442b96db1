----------------------------- MODULE RingBuffer -----------------------------
(***************************************************************************)
(* The allocator of vLLM's SingleWriterShmRingBuffer, exactly as the seed's *)
(* CODE behaves (not as its docstring diagrams draw it).                   *)
(*                                                                         *)
(* Units (DESIGN.md): one unit is 16 bytes; N units of ring; a chunk of     *)
(* `size` units is the whole chunk, header included.  All the allocator's   *)
(* arithmetic is homogeneous, so scaling by 16 maps spec states to real     *)
(* ones exactly.                                                           *)
(*                                                                         *)
(* Addresses are virtual: they grow by one lap (N) each time the writer     *)
(* wraps; `address % N` is the physical cell.  The pure arithmetic sits in  *)
(* operators (Place, Reclaim, LapCorrect, FreeLoop, FreedIds) that mirror   *)
(* refimpl/allocator.py and that ShmObjectStorage.tla reuses via INSTANCE.  *)
(*                                                                         *)
(* Memory: the ring writes, at a chunk's first cell, a header whose size    *)
(* field free_buf reads back (`freed_bytes += metadata[1]`); `hdr_size`     *)
(* models that field per physical cell.                                    *)
(***************************************************************************)
EXTENDS Integers, FiniteSets, Sequences, TLC

CONSTANTS
    N,          \* ring size in units (data_buffer_size = 16*N bytes)
    ID_MAX,     \* ids wrap to 0 at ID_MAX (ring.ID_MAX; 2**31 in the seed)
    Sizes,      \* chunk sizes (units, header included) allocate_buf may ask for
    FreeSizes,  \* nbytes arguments (units) of free_buf; N stands for None
    FIXED       \* TRUE: refimpl's fix F1 (MemoryError at ID_MAX-1 live chunks)

ASSUME NAssumption == N \in Nat \ {0}
ASSUME IdMaxAssumption == ID_MAX \in Nat /\ ID_MAX >= 2
ASSUME SizesAssumption == Sizes \subseteq 1..N
ASSUME FreeSizesAssumption == FreeSizes \subseteq Nat \ {0}
ASSUME FixedAssumption == FIXED \in BOOLEAN

VARIABLES
    data_buffer_start,   \* virtual address of the oldest live chunk (0 when empty)
    data_buffer_end,     \* virtual address just past the newest chunk
    monotonic_id_start,  \* id of the oldest live chunk
    monotonic_id_end,    \* id the next chunk gets
    metadata,            \* id -> virtual address (ring.metadata)
    hdr_size,            \* physical cell -> size field of the header written there
    marked,              \* environment: ids whose is_free_fn answers TRUE
    chunks,              \* ghost: chunks allocated and not reclaimed, [id, addr, size]
    last_action          \* [name |-> action, <arguments>, outcome |-> ...]

vars == <<data_buffer_start, data_buffer_end, monotonic_id_start,
          monotonic_id_end, metadata, hdr_size, marked, chunks, last_action>>

-----------------------------------------------------------------------------
(* Helpers on functions (dicts).                                           *)

\* dict[x] = v, whether or not x is already a key (Python assignment).
Extend(f, x, v) == [y \in DOMAIN f \cup {x} |-> IF y = x THEN v ELSE f[y]]
\* del dict[x]
Remove(f, x) == [y \in DOMAIN f \ {x} |-> f[y]]
\* an empty dict
EmptyFn == [x \in {} |-> 0]
Cells == 0..(N - 1)
NoAddr == -1

-----------------------------------------------------------------------------
(* The allocator arithmetic (refimpl/allocator.py).                        *)

\* place(end, start, size): the address of a new chunk, or NoAddr.  A chunk
\* that does not fit in the rest of the lap starts the next lap; it fits when
\* the occupied span measured from `start` stays within N.
Place(end, start, size) ==
    LET a == IF (end % N) + size > N THEN (end \div N + 1) * N ELSE end
    IN  IF a + size - start > N THEN NoAddr ELSE a

\* next_id(id)
NextId(id) == (id + 1) % ID_MAX

\* reclaim(start, end, next_address): <<start, end>> once the oldest chunk
\* is gone; next_address = NoAddr when no chunk is left (reset to 0).
Reclaim(start, end, next_address) ==
    IF next_address = NoAddr THEN <<0, 0>>
    ELSE <<start + ((next_address - start) % N), end>>

\* lap_correct(start, end): move both back one lap once start crossed it.
LapCorrect(start, end) ==
    IF start >= N THEN <<start - N, end - N>> ELSE <<start, end>>

\* freed_ids(before, after): what free_buf RETURNS, as a sequence.
FreedIds(before, after) ==
    IF after >= before
    THEN [i \in 1..(after - before) |-> before + i - 1]
    ELSE [i \in 1..((ID_MAX - before) + after) |->
            IF i <= ID_MAX - before THEN before + i - 1
                                    ELSE i - (ID_MAX - before) - 1]

\* Allocation refused?  Seed: only when Place fails.  F1 (FIXED): also when
\* ID_MAX - 1 chunks are live, so that the next id never names a live chunk.
AllocAddr(end, start, md, size) ==
    IF FIXED /\ Cardinality(DOMAIN md) >= ID_MAX - 1 THEN NoAddr
    ELSE Place(end, start, size)

\* The loop of free_buf.  s = [start, end, ids, md, freed]; isfree and sz map
\* every id of the metadata at loop entry to is_free_fn's answer and to the
\* size field of its header.  Neither changes during the loop (is_free_fn
\* only reads; reader counts only grow, so evaluating the whole loop at one
\* instant gives the same result as the seed's chunk-by-chunk reads).
RECURSIVE FreeLoop(_, _, _, _)
FreeLoop(s, isfree, sz, nbytes) ==
    IF s.ids \in DOMAIN s.md /\ s.freed < nbytes /\ isfree[s.ids]
    THEN LET md2 == Remove(s.md, s.ids)
             nid == NextId(s.ids)
             se  == Reclaim(s.start, s.end,
                            IF nid \in DOMAIN md2 THEN md2[nid] ELSE NoAddr)
         IN  FreeLoop([start |-> se[1], end |-> se[2], ids |-> nid,
                       md |-> md2, freed |-> s.freed + sz[s.ids]],
                      isfree, sz, nbytes)
    ELSE s

\* free_buf(is_free_fn, nbytes) as a whole: the loop, the lap correction and
\* the returned ids.  Result [start, end, ids, md, ret].
FreeBuf(start, end, ids, md, isfree, sz, nbytes) ==
    LET s  == FreeLoop([start |-> start, end |-> end, ids |-> ids, md |-> md,
                        freed |-> 0], isfree, sz, nbytes)
        lc == LapCorrect(s.start, s.end)
    IN  [start |-> lc[1], end |-> lc[2], ids |-> s.ids, md |-> s.md,
         ret |-> FreedIds(ids, s.ids)]

\* The chunk records (ghost) that a free step reclaimed: those whose id left
\* the metadata and whose address was the one the metadata held.
Reclaimed(ch, md_before, md_after) ==
    {c \in ch : c.id \in DOMAIN md_before \ DOMAIN md_after
                /\ md_before[c.id] = c.addr}

-----------------------------------------------------------------------------
(* Actions.                                                                *)

Init ==
    /\ data_buffer_start = 0
    /\ data_buffer_end = 0
    /\ monotonic_id_start = 0
    /\ monotonic_id_end = 0
    /\ metadata = EmptyFn
    /\ hdr_size = [c \in Cells |-> 0]
    /\ marked = {}
    /\ chunks = {}
    /\ last_action = [name |-> "init", outcome |-> "ok"]

\* allocate_buf(size): ring.allocate_buf(16*size - 8).  MemoryError changes
\* nothing.  On success the header goes to the chunk's first cell and
\* metadata[id] := address OVERWRITES a live entry when ids collide.
allocate_buf(size) ==
    LET a == AllocAddr(data_buffer_end, data_buffer_start, metadata, size)
        id == monotonic_id_end
    IN  IF a = NoAddr
        THEN /\ last_action' = [name |-> "allocate_buf", size |-> size,
                                outcome |-> "MemoryError"]
             /\ UNCHANGED <<data_buffer_start, data_buffer_end,
                            monotonic_id_start, monotonic_id_end, metadata,
                            hdr_size, marked, chunks>>
        ELSE /\ data_buffer_end' = a + size
             /\ monotonic_id_end' = NextId(id)
             /\ metadata' = Extend(metadata, id, a)
             /\ hdr_size' = [hdr_size EXCEPT ![a % N] = size]
             /\ marked' = marked \ {id}   \* a new chunk is not free yet
             /\ chunks' = chunks \cup {[id |-> id, addr |-> a, size |-> size]}
             /\ last_action' = [name |-> "allocate_buf", size |-> size,
                                outcome |-> "ok"]
             /\ UNCHANGED <<data_buffer_start, monotonic_id_start>>

\* mark_free(id): environment; the chunk's is_free_fn starts answering TRUE.
mark_free(id) ==
    /\ id \in DOMAIN metadata \ marked
    /\ marked' = marked \cup {id}
    /\ last_action' = [name |-> "mark_free", id |-> id, outcome |-> "ok"]
    /\ UNCHANGED <<data_buffer_start, data_buffer_end, monotonic_id_start,
                   monotonic_id_end, metadata, hdr_size, chunks>>

\* free_buf(nbytes): ring.free_buf(lambda id, buf: id in marked, 16*nbytes).
\* `freed` is what the seed returns (the id range start_before..start_after).
free_buf(nbytes) ==
    LET isfree == [i \in DOMAIN metadata |-> i \in marked]
        sz     == [i \in DOMAIN metadata |-> hdr_size[metadata[i] % N]]
        r      == FreeBuf(data_buffer_start, data_buffer_end,
                          monotonic_id_start, metadata, isfree, sz, nbytes)
    IN  /\ data_buffer_start' = r.start
        /\ data_buffer_end' = r.end
        /\ monotonic_id_start' = r.ids
        /\ metadata' = r.md
        /\ marked' = marked \cap DOMAIN r.md
        /\ chunks' = chunks \ Reclaimed(chunks, metadata, r.md)
        /\ last_action' = [name |-> "free_buf", nbytes |-> nbytes,
                           outcome |-> "ok", freed |-> r.ret]
        /\ UNCHANGED <<monotonic_id_end, hdr_size>>

\* clear(): forget every chunk; ids keep increasing.
clear ==
    /\ metadata' = EmptyFn
    /\ monotonic_id_start' = monotonic_id_end
    /\ data_buffer_start' = 0
    /\ data_buffer_end' = 0
    /\ marked' = {}
    /\ chunks' = {}
    /\ last_action' = [name |-> "clear", outcome |-> "ok"]
    /\ UNCHANGED <<monotonic_id_end, hdr_size>>

Next ==
    \/ \E s \in Sizes : allocate_buf(s)
    \/ \E i \in 0..(ID_MAX - 1) : mark_free(i)
    \/ \E b \in FreeSizes : free_buf(b)
    \/ clear

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* Invariants.                                                             *)

TypeOk ==
    /\ data_buffer_start \in 0..(N - 1)
    /\ data_buffer_end \in 0..(2 * N)
    /\ monotonic_id_start \in 0..(ID_MAX - 1)
    /\ monotonic_id_end \in 0..(ID_MAX - 1)
    /\ DOMAIN metadata \subseteq 0..(ID_MAX - 1)
    /\ \A i \in DOMAIN metadata : metadata[i] \in 0..(2 * N - 1)
    /\ hdr_size \in [Cells -> 0..N]
    /\ marked \subseteq DOMAIN metadata
    /\ \A c \in chunks : c.id \in 0..(ID_MAX - 1) /\ c.size \in Sizes

\* The occupied span never exceeds the ring, start stays in the first lap.
SpanBound ==
    /\ data_buffer_start <= data_buffer_end
    /\ data_buffer_end - data_buffer_start <= N

\* Physical cells of a chunk record (a chunk never straddles the end).
CellsOf(c) == (c.addr % N)..((c.addr % N) + c.size - 1)

\* No two chunks that the allocator handed out and did not reclaim share a cell.
LiveDisjoint ==
    \A c1, c2 \in chunks : c1 # c2 => CellsOf(c1) \cap CellsOf(c2) = {}

\* No two unreclaimed chunks carry the same id.
LiveIdsDistinct ==
    \A c1, c2 \in chunks : c1 # c2 => c1.id # c2.id

\* The metadata is exactly the set of unreclaimed chunks.
MetadataAgrees ==
    /\ DOMAIN metadata = {c.id : c \in chunks}
    /\ \A c \in chunks : metadata[c.id] = c.addr

\* [monotonic_id_start, monotonic_id_end) names the live chunks without
\* ambiguity: with ID_MAX live chunks start = end, as for an empty ring.
IdRangeUnambiguous == Cardinality(DOMAIN metadata) < ID_MAX

\* The lap correction in free_buf moves start and end back by N but leaves
\* the metadata's (and the handles') addresses alone, so a live chunk's
\* address may be one lap ahead of data_buffer_start.  Norm(a) is the
\* address on the lap that starts at data_buffer_start.
Norm(a) == data_buffer_start + ((a - data_buffer_start) % N)

\* Live chunks lie in FIFO order: ids consecutive from monotonic_id_start,
\* addresses (modulo laps) strictly increasing, the first at
\* data_buffer_start, the last ending at data_buffer_end; an empty ring is
\* reset to 0.
FifoOrder ==
    LET L == Cardinality(DOMAIN metadata)
        id(k) == (monotonic_id_start + k) % ID_MAX
        a(k) == Norm(metadata[id(k)])
        sz(k) == hdr_size[metadata[id(k)] % N]
    IN  IF L = 0
        THEN data_buffer_start = 0 /\ data_buffer_end = 0
        ELSE /\ DOMAIN metadata = {id(k) : k \in 0..(L - 1)}
             /\ NextId(id(L - 1)) = monotonic_id_end
             /\ a(0) = data_buffer_start
             /\ \A k \in 0..(L - 2) : a(k) + sz(k) <= a(k + 1)
             /\ a(L - 1) + sz(L - 1) = data_buffer_end

=============================================================================
