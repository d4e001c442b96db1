---------------------------- MODULE StorageAlloc ----------------------------
(***************************************************************************)
(* The storage's use of the allocator (RingBuffer.tla): free_unused's      *)
(* target and free loop with the writer's maps, allocate_buf's decision,   *)
(* and the writes of a put (header, count, payload; MIMIC: a payload       *)
(* that reads as a header).  Operators on the writer's state record S      *)
(* (StorageState's Cur), so that put can free and retry in one step.       *)
(***************************************************************************)
EXTENDS StorageState

\* Bytes per unit: 16, twice the 8-byte chunk header (DESIGN.md, Units).  A
\* serde with more overhead per object needs wider units (the oracle's
\* shmref.store.values.unit_for); MCStorageWide overrides this with 32.
UNIT_BYTES == 16

\* free_unused's target in bytes, with max_object_size = UNIT_BYTES*MAX_OBJ
\* - 8: seed 2*max_object_size, refimpl (FIXED) 2*(max_object_size + 8) - 1.
\* The free loop frees whole chunks while the freed bytes are below it, so
\* in units it stops at the ceiling of target / UNIT_BYTES: 2*MAX_OBJ - 1
\* for the seed with 16-byte units, 2*MAX_OBJ for refimpl and for the seed
\* with any wider unit (32, 48, ...: 16 / UNIT_BYTES < 1).  Units are exact
\* only for chunk sizes that are multiples of the unit; MCRingBytes checks
\* the target byte by byte.
FreeTargetBytes ==
    IF FIXED THEN 2 * UNIT_BYTES * MAX_OBJ - 1 ELSE 2 * (UNIT_BYTES * MAX_OBJ - 8)
FreeTarget == (FreeTargetBytes + UNIT_BYTES - 1) \div UNIT_BYTES

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

=============================================================================
