---------------------------- MODULE StorageState ----------------------------
(***************************************************************************)
(* ShmObjectStorage's state: constants, variables, the ring it uses        *)
(* (RingBuffer.tla, by INSTANCE), the helpers every part shares, the       *)
(* writer's state as one record (Cur/Commit), the is_free check, and       *)
(* Init.  The whole protocol and its switches: ShmObjectStorage.tla.       *)
(***************************************************************************)
EXTENDS Integers, FiniteSets, Sequences, TLC

CONSTANTS
    N,          \* ring size in units
    ID_MAX,     \* ids wrap to 0 at ID_MAX
    MAX_OBJ,    \* largest chunk in units (max_object_size = 16*MAX_OBJ - 8)
    Keys,       \* keys the writer puts
    Sizes,      \* chunk sizes put may be asked for (> MAX_OBJ: ValueError)
    Readers,    \* the reader processes; R = Cardinality(Readers)
    Forged,     \* handles an attacker may present (must be rejected)
    MaxIssues,  \* bound: number of handle issuances (put + get_cached)
    CLEAR_WHEN, A1, A3, LOSSY, COPY_FAIL, FIXED

ASSUME NAssumption == N \in Nat \ {0}
ASSUME IdMaxAssumption == ID_MAX \in Nat /\ ID_MAX >= 2
ASSUME MaxObjAssumption == MAX_OBJ \in 1..N
ASSUME KeysAssumption == Keys # {}
ASSUME SizesAssumption == Sizes \subseteq Nat \ {0}
ASSUME ReadersAssumption == Readers # {}
ASSUME ForgedAssumption ==
    \A f \in Forged : f[1] \in Keys /\ f[2] \in Nat /\ f[3] \in Nat
ASSUME MaxIssuesAssumption == MaxIssues \in Nat
ASSUME SwitchAssumption ==
    /\ {A1, A3, LOSSY, COPY_FAIL, FIXED} \subseteq BOOLEAN
    /\ CLEAR_WHEN \in {"quiescent", "no_read_in_flight", "any"}

VARIABLES
    \* the ring (RingBuffer.tla)
    data_buffer_start, data_buffer_end, monotonic_id_start, monotonic_id_end,
    metadata,
    \* the writer's private maps
    key_index,      \* key -> <<address, id>>
    id_index,       \* id -> key
    writer_flag,    \* id -> number of issuances
    touched,        \* ids protected by touch()
    \* shared memory, per physical cell
    hdr_id,         \* id field of a header at the cell (NoId: payload/never)
    hdr_size,       \* size field of a header at the cell
    count,          \* reader count field at the cell (meaningful at headers)
    payload,        \* whose payload bytes the cell holds (NoKey, Corrupt)
    \* handles
    issued,         \* handle -> size of the put that issued it
    inbox,          \* reader -> bag of handles delivered, not yet read
    revoked,        \* reader -> bag of deliveries whose signature a
                    \*   rotation made invalid (ROTATE): reading one is rejected
    rotate_at,      \* F4's fence: the id whose next issue rotates the secret
                    \*   (the oldest id a clear() forgot), or NoId
    rd,             \* reader -> state of its current read
    \* ghosts and bounds
    chunks,         \* chunks allocated and not reclaimed:
                    \*   [id, addr, size, key, reads], reads = increments by
                    \*   readers whose handle names this chunk
    nissued,        \* issuances so far (bounded by MaxIssues)
    last_action     \* [name |-> action, <arguments>, outcome |-> ...]

ring_vars == <<data_buffer_start, data_buffer_end, monotonic_id_start,
               monotonic_id_end, metadata>>
writer_vars == <<key_index, id_index, writer_flag, touched>>
mem_vars == <<hdr_id, hdr_size, count, payload>>
vars == <<ring_vars, writer_vars, mem_vars, issued, inbox, revoked, rotate_at, rd,
          chunks, nissued, last_action>>

Ring == INSTANCE RingBuffer WITH Sizes <- 1..N, FreeSizes <- {N},
                                 marked <- {}

R == Cardinality(Readers)
Cells == 0..(N - 1)
NoId == -1
NoKey == "none"
Corrupt == "corrupt"
NoHandle == <<>>
NoAddr == Ring!NoAddr
Extend(f, x, v) == Ring!Extend(f, x, v)
Remove(f, x) == Ring!Remove(f, x)
EmptyFn == Ring!EmptyFn

\* The value put under key k in a chunk of s cells: bytes derived from k,
\* padded to the chunk (DESIGN.md); one element per cell.
Value(k, s) == [i \in 1..s |-> k]

\* F2 residual window: with SPLIT_END (and FIXED) get_end is two steps,
\* get_check (re-check of the header id) then get_end (increment), and the
\* writer may step in between.  Overridden in a model's cfg, not a constant
\* (so the existing cfgs and generated trace cfgs need not name it).
SPLIT_END == FALSE
Split == SPLIT_END /\ FIXED

\* _validate_monotonic_id: the header at cell p carries the handle's id.
IdMatches(p, h) == hdr_id[p] = h[3]

IdleRead == [st |-> "idle", h |-> NoHandle, pos |-> 0, size |-> 0,
             val |-> <<>>]

\* Bags (inboxes): function handle -> number of copies.
BagAdd(b, h) == IF h \in DOMAIN b THEN [b EXCEPT ![h] = @ + 1]
                ELSE Extend(b, h, 1)
BagTake(b, h) == IF b[h] = 1 THEN Remove(b, h) ELSE [b EXCEPT ![h] = @ - 1]
BagUnion(a, b) == [h \in DOMAIN a \cup DOMAIN b |->
                     (IF h \in DOMAIN a THEN a[h] ELSE 0)
                     + (IF h \in DOMAIN b THEN b[h] ELSE 0)]

-----------------------------------------------------------------------------
(* The writer's state as one record, so that put can run free_unused and  *)
(* a second allocation in one step.                                       *)

Cur == [start |-> data_buffer_start, end |-> data_buffer_end,
        ids |-> monotonic_id_start, ide |-> monotonic_id_end,
        md |-> metadata, ki |-> key_index, ii |-> id_index,
        wf |-> writer_flag, tc |-> touched, hid |-> hdr_id,
        hsz |-> hdr_size, cnt |-> count, pl |-> payload, ch |-> chunks]

Commit(S) ==
    /\ data_buffer_start' = S.start
    /\ data_buffer_end' = S.end
    /\ monotonic_id_start' = S.ids
    /\ monotonic_id_end' = S.ide
    /\ metadata' = S.md
    /\ key_index' = S.ki
    /\ id_index' = S.ii
    /\ writer_flag' = S.wf
    /\ touched' = S.tc
    /\ hdr_id' = S.hid
    /\ hdr_size' = S.hsz
    /\ count' = S.cnt
    /\ payload' = S.pl
    /\ chunks' = S.ch

\* writer_flag.get(id, 0)
WFlag(wf, id) == IF id \in DOMAIN wf THEN wf[id] ELSE 0

\* default_is_free_check(id, buf): not touched and count >= writer_flag*R.
IsFreeIn(S, id) ==
    /\ id \notin S.tc
    /\ S.cnt[S.md[id] % N] >= WFlag(S.wf, id) * R

\* Handles some reader may still present (for A3).
Outstanding ==
    UNION {DOMAIN inbox[r] : r \in Readers}
    \cup {rd[r].h : r \in {x \in Readers : rd[x].st # "idle"}}
    \cup (IF A1 THEN {} ELSE DOMAIN issued)

Init ==
    /\ data_buffer_start = 0
    /\ data_buffer_end = 0
    /\ monotonic_id_start = 0
    /\ monotonic_id_end = 0
    /\ metadata = EmptyFn
    /\ key_index = EmptyFn
    /\ id_index = EmptyFn
    /\ writer_flag = EmptyFn
    /\ touched = {}
    /\ hdr_id = [c \in Cells |-> NoId]
    /\ hdr_size = [c \in Cells |-> 0]
    /\ count = [c \in Cells |-> 0]
    /\ payload = [c \in Cells |-> NoKey]
    /\ issued = EmptyFn
    /\ inbox = [r \in Readers |-> EmptyFn]
    /\ revoked = [r \in Readers |-> EmptyFn]
    /\ rotate_at = NoId
    /\ rd = [r \in Readers |-> IdleRead]
    /\ chunks = {}
    /\ nissued = 0
    /\ last_action = [name |-> "init", outcome |-> "ok"]

=============================================================================
