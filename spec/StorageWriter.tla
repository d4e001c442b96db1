--------------------------- MODULE StorageWriter ---------------------------
(***************************************************************************)
(* The writer's actions but clear(): put (with its free_unused retry),     *)
(* get_cached, touch, release_touches, free_unused.  Each is one step.     *)
(***************************************************************************)
EXTENDS StorageAlloc, StorageSignatures

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
            /\ UNCHANGED <<ring_vars, writer_vars, mem_vars, issued, inbox, revoked, rotate_at,
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
                     /\ UNCHANGED <<issued, inbox, revoked, rotate_at, nissued>>
                ELSE LET h == <<k, a, S.ide>>
                     IN  /\ \E m \in Mimics(a, size) :
                                Commit(WriteOn(S, k, size, a, m))
                         /\ IssueNew(h, size)
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
    /\ UNCHANGED <<ring_vars, key_index, id_index, mem_vars, rd, chunks, rotate_at>>

\* touch(key) on the writer: protect the key's chunk until get_cached or
\* release_touches.  (Touching an uncached key is a no-op; not modelled.)
touch(k) ==
    /\ k \in DOMAIN key_index
    /\ key_index[k][2] \notin touched
    /\ touched' = touched \cup {key_index[k][2]}
    /\ last_action' = [name |-> "touch", key |-> k, outcome |-> "ok"]
    /\ UNCHANGED <<ring_vars, rotate_at, key_index, id_index, writer_flag, mem_vars,
                   issued, inbox, revoked, rd, chunks, nissued>>

\* release_touches() (only taken when something is touched).
release_touches ==
    /\ touched # {}
    /\ touched' = {}
    /\ last_action' = [name |-> "release_touches", outcome |-> "ok"]
    /\ UNCHANGED <<ring_vars, rotate_at, key_index, id_index, writer_flag, mem_vars,
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
        /\ UNCHANGED <<issued, inbox, revoked, rotate_at, rd, nissued>>

=============================================================================
