-------------------------- MODULE ShmObjectStorage --------------------------
(***************************************************************************)
(* vLLM's SingleWriterShmObjectStorage: one writer, R readers, one shared  *)
(* ring (RingBuffer.tla), as the seed's CODE behaves.                      *)
(*                                                                         *)
(* Memory is modelled per unit cell (16 bytes).  A chunk of `size` cells   *)
(* at physical cell p holds, in cell p, the ring header (id, size) and the *)
(* 4-byte reader count; every cell p..p+size-1 holds payload bytes of the  *)
(* chunk's key (`payload`).  A reader opens the cell `address % N`, checks *)
(* the id in whatever header is there, copies the cells, and increments    *)
(* the count field at that cell: if another chunk's header sits there its  *)
(* count is inflated, if another chunk's payload sits there that payload  *)
(* is corrupted.  Payload bytes never look like a header (hdr_id = NoId).  *)
(*                                                                         *)
(* Handles are <<key, address, id>>.  HMAC signatures are abstracted: a    *)
(* handle verifies iff the writer issued it (`issued`); the secret never   *)
(* changes, so a handle stays verifiable forever.  Handles travel to each  *)
(* reader through an inbox (a bag): deliveries may be held back and        *)
(* consumed late and out of order.                                         *)
(*                                                                         *)
(* Switches (BOOLEAN constants) turn the protocol's assumptions on or off  *)
(* so that one spec gives the must-pass and the hazard models:             *)
(*   A1  each issuance is read exactly once by each reader                 *)
(*       (FALSE: a reader may read any issued handle again, any time)      *)
(*   CLEAR_WHEN  when the writer may clear():                              *)
(*       "quiescent"          A2: no read in flight, no delivery pending   *)
(*       "no_read_in_flight"  deliveries may still be pending (draining)   *)
(*       "any"                even while a read is in flight               *)
(*   A3  ids do not wrap while a handle is outstanding: put is not taken   *)
(*       when the id it would get is the id of an outstanding handle       *)
(*   LOSSY     environment may drop a delivery (request aborted)           *)
(*   COPY_FAIL deserialization may fail in get_copy                        *)
(*   FIXED     refimpl's fixes F1 (MemoryError at ID_MAX-1 live chunks),   *)
(*             F2 (get_end re-checks the header id under the reader lock   *)
(*             and does not increment if it changed), F3 (a read whose     *)
(*             copy failed still increments).                              *)
(*                                                                         *)
(* Atomicity: every writer operation (put with its free_unused retry,     *)
(* free_unused, clear) is one step; a read is three steps (get_begin,      *)
(* get_copy, get_end) so the writer can act in between.  get_end (re-check *)
(* under FIXED and increment) is ONE step: the writer does not take the    *)
(* reader lock, so in the real code a writer step can fall between the     *)
(* re-check and the increment.  SPLIT_END (a definition, FALSE here; a    *)
(* model overrides it with `SPLIT_END <- MCSplitEnd`) models that window:  *)
(* get_check (F2's re-check) and get_end (the increment) become two steps. *)
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
    revoked,        \* reader -> bag of deliveries whose signature a clear()
                    \*   made invalid (ROTATE): reading one is rejected
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
vars == <<ring_vars, writer_vars, mem_vars, issued, inbox, revoked, rd, chunks,
          nissued, last_action>>

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

\* free_unused's target.  Seed: 2*max_object_size bytes = 2*MAX_OBJ - 1
\* units.  refimpl (FIXED): 2*(max_object_size + 8) - 1 = 32*MAX_OBJ - 1
\* bytes; the free loop compares whole-unit sums (multiples of 16) with it,
\* so it stops at the same chunk as a target of 2*MAX_OBJ units.  Units are
\* exact only for chunk sizes that are multiples of 16 (DESIGN.md, Units);
\* MCRingBytes checks the target byte by byte.
FreeTarget == IF FIXED THEN 2 * MAX_OBJ ELSE 2 * MAX_OBJ - 1

IdleRead == [st |-> "idle", h |-> NoHandle, pos |-> 0, size |-> 0,
             val |-> <<>>]

\* Bags (inboxes): function handle -> number of copies.
BagAdd(b, h) == IF h \in DOMAIN b THEN [b EXCEPT ![h] = @ + 1]
                ELSE Extend(b, h, 1)
BagTake(b, h) == IF b[h] = 1 THEN Remove(b, h) ELSE [b EXCEPT ![h] = @ - 1]
BagUnion(a, b) == [h \in DOMAIN a \cup DOMAIN b |->
                     (IF h \in DOMAIN a THEN a[h] ELSE 0)
                     + (IF h \in DOMAIN b THEN b[h] ELSE 0)]

\* F4 (refimpl): clear() writes a new handle-signing secret, so a handle
\* signed before the clear no longer verifies: its pending deliveries move
\* to `revoked` and a get of one is rejected.  A definition (TRUE with
\* FIXED), overridden in a cfg with `ROTATE <- MCNoRotate`, so that other
\* cfgs and generated trace cfgs need not name it.
ROTATE == FIXED

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

\* free_unused() on S: ring.free_buf(default_is_free_check, 2*max_object_size)
\* then, for every id free_buf RETURNS, del key_index[id_index[id]],
\* id_index[id], writer_flag[id].  Result: S' and the returned ids.
FreeUnusedOn(S) ==
    LET isfree == [i \in DOMAIN S.md |-> IsFreeIn(S, i)]
        sz == [i \in DOMAIN S.md |-> S.hsz[S.md[i] % N]]
        r == Ring!FreeBuf(S.start, S.end, S.ids, S.md, isfree, sz, FreeTarget)
        fids == {r.ret[j] : j \in DOMAIN r.ret}
        fkeys == {S.ii[i] : i \in fids \cap DOMAIN S.ii}
    IN  [s |-> [S EXCEPT !.start = r.start, !.end = r.end, !.ids = r.ids,
                         !.md = r.md,
                         !.ki = [k \in DOMAIN S.ki \ fkeys |-> S.ki[k]],
                         !.ii = [i \in DOMAIN S.ii \ fids |-> S.ii[i]],
                         !.wf = [i \in DOMAIN S.wf \ fids |-> S.wf[i]],
                         !.ch = S.ch \ Ring!Reclaimed(S.ch, S.md, r.md)],
         freed |-> r.ret,
         \* the seed would raise KeyError on a missing id or key
         keyerror |-> ~(fids \subseteq DOMAIN S.ii /\ fkeys \subseteq DOMAIN S.ki)]

\* allocate_buf's decision on S.
AllocOn(S, size) == Ring!AllocAddr(S.end, S.start, S.md, size)

\* allocate_buf at address a, the writes of put (header, count := 0,
\* payload), increment_writer_flag, key_index, id_index.
\* MIMIC (a definition, FALSE by default; a cfg overrides it with
\* `MIMIC <- MCMimic`): the payload bytes of a new chunk may look like a
\* header.  put then also chooses one payload cell (offset o > 0) whose
\* bytes read as header (id, sz), as whoever supplied the value can arrange
\* (FINDINGS #10, issue 15 item 4).  NoMimic: payload bytes are not a header.
MIMIC == FALSE
NoMimic == [off |-> 0, id |-> NoId, sz |-> 0]
Mimics(a, size) ==
    IF MIMIC
    THEN {NoMimic} \cup
         UNION {{[off |-> o, id |-> i, sz |-> z] :
                   i \in 0..(ID_MAX - 1), z \in 1..(N - ((a % N) + o))}
                : o \in 1..(size - 1)}
    ELSE {NoMimic}

WriteOn(S, k, size, a, m) ==
    LET id == S.ide
        p == a % N
    IN  [S EXCEPT
            !.end = a + size,
            !.ide = Ring!NextId(id),
            !.md = Extend(S.md, id, a),
            !.hid = [c \in Cells |-> IF c = p THEN id
                                     ELSE IF m.off > 0 /\ c = p + m.off THEN m.id
                                     ELSE IF p < c /\ c < p + size THEN NoId
                                     ELSE S.hid[c]],
            !.hsz = [c \in Cells |-> IF c = p THEN size
                                     ELSE IF m.off > 0 /\ c = p + m.off THEN m.sz
                                     ELSE IF p < c /\ c < p + size THEN 0
                                     ELSE S.hsz[c]],
            !.cnt = [c \in Cells |-> IF p <= c /\ c < p + size THEN 0
                                     ELSE S.cnt[c]],
            !.pl = [c \in Cells |-> IF p <= c /\ c < p + size THEN k
                                    ELSE S.pl[c]],
            !.wf = Extend(S.wf, id, WFlag(S.wf, id) + 1),
            !.ki = Extend(S.ki, k, <<a, id>>),
            !.ii = Extend(S.ii, id, k),
            !.ch = S.ch \cup {[id |-> id, addr |-> a, size |-> size, key |-> k,
                               reads |-> 0]}]

\* Handles some reader may still present (for A3).
Outstanding ==
    UNION {DOMAIN inbox[r] : r \in Readers}
    \cup {rd[r].h : r \in {x \in Readers : rd[x].st # "idle"}}
    \cup (IF A1 THEN {} ELSE DOMAIN issued)

-----------------------------------------------------------------------------
(* Writer actions.                                                         *)

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
    /\ rd = [r \in Readers |-> IdleRead]
    /\ chunks = {}
    /\ nissued = 0
    /\ last_action = [name |-> "init", outcome |-> "ok"]

\* Issue handle h (of a chunk of `size` cells) to every reader.
Issue(h, size) ==
    /\ issued' = Extend(issued, h, size)
    /\ inbox' = [r \in Readers |-> BagAdd(inbox[r], h)]
    /\ UNCHANGED revoked
    /\ nissued' = nissued + 1

\* put(key, size): storage.put(key, value) with a 16*size - 8 byte object.
\* ValueError (nothing changes) if the key is cached or size > MAX_OBJ.
\* If allocate_buf fails: free_unused, allocate again, MemoryError if that
\* fails too (the free_unused stays done).
put(k, size) ==
    /\ nissued < MaxIssues
    /\ A3 => monotonic_id_end \notin {h[3] : h \in Outstanding}
    /\ rd' = rd
    /\ IF k \in DOMAIN key_index \/ size > MAX_OBJ
       THEN /\ last_action' = [name |-> "put", key |-> k, size |-> size,
                               outcome |-> "ValueError", handle |-> NoHandle]
            /\ UNCHANGED <<ring_vars, writer_vars, mem_vars, issued, inbox, revoked,
                           chunks, nissued>>
       ELSE LET a1 == AllocOn(Cur, size)
                F  == FreeUnusedOn(Cur)
                a2 == AllocOn(F.s, size)
                S  == IF a1 # NoAddr THEN Cur ELSE F.s
                a  == IF a1 # NoAddr THEN a1 ELSE a2
            IN  IF a = NoAddr
                THEN /\ Commit(F.s)
                     /\ last_action' = [name |-> "put", key |-> k,
                                        size |-> size,
                                        outcome |-> "MemoryError",
                                        handle |-> NoHandle]
                     /\ UNCHANGED <<issued, inbox, revoked, nissued>>
                ELSE LET h == <<k, a, S.ide>>
                     IN  /\ \E m \in Mimics(a, size) :
                                Commit(WriteOn(S, k, size, a, m))
                         /\ Issue(h, size)
                         /\ last_action' = [name |-> "put", key |-> k,
                                            size |-> size, outcome |-> "ok",
                                            handle |-> h]

\* get_cached(key) + get_signature(key): count one more issuance, stop
\* protecting the id, issue the same handle again.  The writer only calls it
\* for a cached key (is_cached first).
get_cached(k) ==
    /\ nissued < MaxIssues
    /\ k \in DOMAIN key_index
    /\ LET a == key_index[k][1]
           id == key_index[k][2]
           h == <<k, a, id>>
       IN  /\ writer_flag' = [writer_flag EXCEPT ![id] = @ + 1]
           /\ touched' = touched \ {id}
           /\ Issue(h, issued[h])
           /\ last_action' = [name |-> "get_cached", key |-> k,
                              outcome |-> "ok", handle |-> h]
    /\ UNCHANGED <<ring_vars, key_index, id_index, mem_vars, rd, chunks>>

\* touch(key) on the writer: protect the key's chunk until get_cached or
\* release_touches.  (Touching an uncached key is a no-op; not modelled.)
touch(k) ==
    /\ k \in DOMAIN key_index
    /\ key_index[k][2] \notin touched
    /\ touched' = touched \cup {key_index[k][2]}
    /\ last_action' = [name |-> "touch", key |-> k, outcome |-> "ok"]
    /\ UNCHANGED <<ring_vars, key_index, id_index, writer_flag, mem_vars,
                   issued, inbox, revoked, rd, chunks, nissued>>

\* release_touches() (only taken when something is touched).
release_touches ==
    /\ touched # {}
    /\ touched' = {}
    /\ last_action' = [name |-> "release_touches", outcome |-> "ok"]
    /\ UNCHANGED <<ring_vars, key_index, id_index, writer_flag, mem_vars,
                   issued, inbox, revoked, rd, chunks, nissued>>

\* free_unused() (only taken when it reclaims something; otherwise it
\* changes nothing).
free_unused ==
    LET F == FreeUnusedOn(Cur)
    IN  /\ F.s.md # metadata
        /\ Commit(F.s)
        /\ last_action' = [name |-> "free_unused",
                           outcome |-> IF F.keyerror THEN "KeyError" ELSE "ok",
                           freed |-> F.freed]
        /\ UNCHANGED <<issued, inbox, revoked, rd, nissued>>

\* clear(): ring.clear() and the writer's maps.  Memory is untouched;
\* deliveries already sent stay in the inboxes (requests still draining).
\* ROTATE (F4): the secret changes, so those deliveries are revoked.
clear ==
    /\ CLEAR_WHEN # "any" => \A r \in Readers : rd[r].st = "idle"
    /\ CLEAR_WHEN = "quiescent" => \A r \in Readers : inbox[r] = EmptyFn
    /\ metadata' = EmptyFn
    /\ monotonic_id_start' = monotonic_id_end
    /\ data_buffer_start' = 0
    /\ data_buffer_end' = 0
    /\ key_index' = EmptyFn
    /\ id_index' = EmptyFn
    /\ writer_flag' = EmptyFn
    /\ touched' = {}
    /\ chunks' = {}
    /\ IF ROTATE
       THEN /\ revoked' = [r \in Readers |-> BagUnion(revoked[r], inbox[r])]
            /\ inbox' = [r \in Readers |-> EmptyFn]
       ELSE UNCHANGED <<inbox, revoked>>
    /\ last_action' = [name |-> "clear", outcome |-> "ok"]
    /\ UNCHANGED <<monotonic_id_end, mem_vars, issued, rd, nissued>>

-----------------------------------------------------------------------------
(* Reader actions: storage.get(address, id, signature, key) in three steps. *)

HandleSpace == UNION {DOMAIN inbox[r] \cup DOMAIN revoked[r] : r \in Readers}
               \cup DOMAIN issued \cup Forged

\* get_begin(reader, handle): verify the signature (rejected if the writer
\* never issued the handle, or signed it before a clear that rotated the
\* secret), open the chunk at address % N and check the id in its header
\* (stale: ValueError).  The handle comes from the reader's inbox (the
\* delivery is consumed), or from its revoked deliveries, or is an
\* attacker's, or (not A1) is a handle the reader already read or was never
\* sent.
Begin(r, h, revokedSig) ==
    LET p == h[2] % N
        o == IF revokedSig \/ h \notin DOMAIN issued THEN "rejected"
             ELSE IF ~IdMatches(p, h) THEN "stale"
             ELSE "ok"
    IN  /\ rd' = IF o = "ok"
                 THEN [rd EXCEPT ![r] = [st |-> "open", h |-> h, pos |-> p,
                                         size |-> hdr_size[p],
                                         val |-> <<>>]]
                 ELSE rd
        /\ last_action' = [name |-> "get_begin", reader |-> r,
                           handle |-> h, outcome |-> o]

GetBegin(r, h) ==
    /\ rd[r].st = "idle"
    /\ \/ /\ h \in DOMAIN inbox[r]
          /\ inbox' = [inbox EXCEPT ![r] = BagTake(@, h)]
          /\ revoked' = revoked
          /\ Begin(r, h, FALSE)
       \/ /\ h \in DOMAIN revoked[r]
          /\ revoked' = [revoked EXCEPT ![r] = BagTake(@, h)]
          /\ inbox' = inbox
          /\ Begin(r, h, TRUE)
       \* a forgery (a handle the writer issued is none: reading it outside
       \* the inbox is a re-read, below)
       \/ /\ h \in Forged /\ h \notin DOMAIN issued
          /\ UNCHANGED <<inbox, revoked>>
          /\ Begin(r, h, FALSE)
       \/ /\ ~A1 /\ h \in DOMAIN issued
          /\ UNCHANGED <<inbox, revoked>>
          /\ Begin(r, h, FALSE)
    /\ UNCHANGED <<ring_vars, writer_vars, mem_vars, issued, chunks, nissued>>

\* A delivery from the inbox (A1: the only way an issued handle is read).
ReadInbox(r) ==
    \E h \in DOMAIN inbox[r] \cup DOMAIN revoked[r] :
        /\ GetBegin(r, h)
        /\ inbox'[r] # inbox[r] \/ revoked'[r] # revoked[r]

\* (The handle is chosen inside, so that TLC labels the step get_begin.)
get_begin(r) == \E h \in HandleSpace : GetBegin(r, h)

\* get_copy(reader): deserialize the payload cells of the opened chunk
\* (with the size its header had at get_begin).  COPY_FAIL: it may fail.
get_copy(r) ==
    /\ rd[r].st = "open"
    /\ LET v == [i \in 1..rd[r].size |-> payload[rd[r].pos + i - 1]]
       IN  \/ /\ rd' = [rd EXCEPT ![r].st = "copied", ![r].val = v]
              /\ last_action' = [name |-> "get_copy", reader |-> r,
                                 outcome |-> "ok"]
           \/ /\ COPY_FAIL
              /\ rd' = [rd EXCEPT ![r].st = "failed"]
              /\ last_action' = [name |-> "get_copy", reader |-> r,
                                 outcome |-> "DeserializeError"]
    /\ UNCHANGED <<ring_vars, writer_vars, mem_vars, issued, inbox, revoked, chunks,
                   nissued>>

\* F2's re-check (refimpl's _recheck): the header at the cell the reader
\* opened still has the handle's id AND the size it had at get_begin.
StillOurs(r) == IdMatches(rd[r].pos, rd[r].h) /\ hdr_size[rd[r].pos] = rd[r].size

\* get_end(reader): under the reader lock, increment the count field at the
\* cell the reader opened (whatever lives there now), return the value.
\* Seed: a failed copy raised before the increment (no increment).
\* FIXED: F2 re-check of the header id and size first (stale: no increment);
\*        F3 a failed copy still increments.
\* Split: get_check did the re-check; get_end only increments.
get_end(r) ==
    /\ rd[r].st \in IF Split THEN {"checked", "checked_failed"}
                    ELSE {"copied", "failed"}
    /\ LET h == rd[r].h
           p == rd[r].pos
           failed == rd[r].st \in {"failed", "checked_failed"}
           changed == IF Split THEN FALSE ELSE ~StillOurs(r)
           inc == IF FIXED THEN ~changed ELSE ~failed
           o == IF FIXED /\ changed THEN "stale"
                ELSE IF failed THEN "DeserializeError"
                ELSE "ok"
       IN  /\ IF inc /\ hdr_id[p] # NoId
              THEN /\ count' = [count EXCEPT ![p] = @ + 1]
                   /\ UNCHANGED payload
              ELSE IF inc
              THEN /\ payload' = [payload EXCEPT ![p] = Corrupt]
                   /\ UNCHANGED count
              ELSE UNCHANGED <<count, payload>>
           /\ chunks' = IF inc
                        THEN {IF c.id = h[3] /\ c.addr = h[2]
                              THEN [c EXCEPT !.reads = @ + 1] ELSE c
                              : c \in chunks}
                        ELSE chunks
           /\ last_action' = [name |-> "get_end", reader |-> r, handle |-> h,
                              outcome |-> o,
                              value |-> IF o = "ok" THEN rd[r].val ELSE <<>>]
    /\ rd' = [rd EXCEPT ![r] = IdleRead]
    /\ UNCHANGED <<ring_vars, writer_vars, hdr_id, hdr_size, issued, inbox, revoked,
                   nissued>>

\* get_check(reader) (Split only): F2's re-check of the header id under the
\* reader lock; stale: ValueError, no increment; else get_end follows, and
\* the writer (which does not take the reader lock) may step in between.
get_check(r) ==
    /\ Split
    /\ rd[r].st \in {"copied", "failed"}
    /\ IF StillOurs(r)
       THEN /\ rd' = [rd EXCEPT ![r].st = IF @ = "failed" THEN "checked_failed"
                                          ELSE "checked"]
            /\ last_action' = [name |-> "get_check", reader |-> r,
                               handle |-> rd[r].h, outcome |-> "ok"]
       ELSE /\ rd' = [rd EXCEPT ![r] = IdleRead]
            /\ last_action' = [name |-> "get_end", reader |-> r,
                               handle |-> rd[r].h, outcome |-> "stale",
                               value |-> <<>>]
    /\ UNCHANGED <<ring_vars, writer_vars, mem_vars, issued, inbox, revoked, chunks,
                   nissued>>

\* drop_delivery(reader): environment (LOSSY): a delivery is never read
\* (request aborted, reader gone).  Not a call on the storage.
drop_delivery(r) ==
    /\ LOSSY
    /\ \E h \in DOMAIN inbox[r] :
          /\ inbox' = [inbox EXCEPT ![r] = BagTake(@, h)]
          /\ last_action' = [name |-> "drop_delivery", reader |-> r,
                             handle |-> h, outcome |-> "ok"]
    /\ UNCHANGED <<ring_vars, writer_vars, mem_vars, issued, revoked, rd, chunks,
                   nissued>>

-----------------------------------------------------------------------------

Next ==
    \/ \E k \in Keys, s \in Sizes : put(k, s)
    \/ \E k \in Keys : get_cached(k)
    \/ \E k \in Keys : touch(k)
    \/ release_touches
    \/ free_unused
    \/ clear
    \/ \E r \in Readers : get_begin(r)
    \/ \E r \in Readers : get_copy(r)
    \/ \E r \in Readers : get_check(r)
    \/ \E r \in Readers : get_end(r)
    \/ \E r \in Readers : drop_delivery(r)

Spec == Init /\ [][Next]_vars

\* Readers keep reading; the writer keeps reclaiming and releasing touches.
\* Weak fairness, written out: WF_vars(A) == <>[]ENABLED <<A>>_vars =>
\* []<><<A>>_vars, with ENABLED replaced by an equivalent state predicate
\* and the step recognised by last_action (TLC 2.15 evaluates ENABLED of
\* free_unused, whose recursive free loop it does not cache there, orders
\* of magnitude too slowly).  Fairness is per reader (below); the
\* aggregate ReaderCanStep/ReaderStepped remain for
\* FairnessPredicatesExact.
ReaderStep == \E r \in Readers : ReadInbox(r) \/ get_copy(r) \/ get_check(r)
                                 \/ get_end(r)
\* = ENABLED <<ReaderStep>>_vars
ReaderCanStep == \E r \in Readers : rd[r].st # "idle" \/ inbox[r] # EmptyFn
                                     \/ revoked[r] # EmptyFn
ReaderStepped ==
    \/ last_action'.name \in {"get_copy", "get_check", "get_end"}
    \/ last_action'.name = "get_begin" /\ (inbox' # inbox \/ revoked' # revoked)

Housekeeping == release_touches \/ free_unused
\* = ENABLED <<Housekeeping>>_vars: free_unused frees something iff the
\* oldest chunk passes the is_free check (the target nbytes is > 0)
HousekeepingCanStep ==
    \/ touched # {}
    \/ monotonic_id_start \in DOMAIN metadata
       /\ IsFreeIn(Cur, monotonic_id_start)
HousekeepingStepped ==
    last_action'.name \in {"release_touches", "free_unused"}

\* Per reader: a reader that can step for ever eventually steps, whatever
\* the others do (weak fairness per reader, same construction).
ReaderCanStepR(r) == rd[r].st # "idle" \/ inbox[r] # EmptyFn
                     \/ revoked[r] # EmptyFn
ReaderSteppedR(r) ==
    /\ "reader" \in DOMAIN last_action'
    /\ last_action'.reader = r
    /\ \/ last_action'.name \in {"get_copy", "get_check", "get_end"}
       \/ last_action'.name = "get_begin"
          /\ (inbox'[r] # inbox[r] \/ revoked'[r] # revoked[r])

Fairness ==
    /\ \A r \in Readers : <>[]ReaderCanStepR(r) => []<><<ReaderSteppedR(r)>>_vars
    /\ <>[]HousekeepingCanStep => []<><<HousekeepingStepped>>_vars

\* Checks (small models) that the predicates above are the ENABLED ones.
FairnessPredicatesExact ==
    /\ ReaderCanStep = ENABLED <<ReaderStep>>_vars
    /\ HousekeepingCanStep = ENABLED <<Housekeeping>>_vars

FairSpec == Spec /\ Fairness

-----------------------------------------------------------------------------
(* Invariants.                                                             *)

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
