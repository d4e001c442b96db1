--------------------------- MODULE StorageReader ---------------------------
(***************************************************************************)
(* The reader protocol: storage.get(address, id, signature, key) in        *)
(* three steps (get_begin, get_copy, get_end; four with SPLIT_END's        *)
(* get_check), so that the writer can act in between, and the              *)
(* environment's drop_delivery (LOSSY).                                    *)
(***************************************************************************)
EXTENDS StorageSignatures

\* get_begin(reader, handle): verify the signature (rejected if the writer
\* never issued the handle, or signed it before a clear that rotated the
\* secret), open the chunk at address % N and check the id in its header
\* (stale: ValueError).  The handle comes from the reader's inbox (the
\* delivery is consumed), or from its revoked deliveries, or is an
\* attacker's, or (not A1) is a handle the reader already read or was never
\* sent.
Begin(r, h, revokedSig) ==
    LET p == h[2] % N
        o == IF ~Verifies(h, revokedSig) THEN "rejected"
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
    /\ UNCHANGED <<ring_vars, writer_vars, mem_vars, issued, rotate_at, chunks, nissued>>

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
    /\ UNCHANGED <<ring_vars, writer_vars, mem_vars, issued, inbox, revoked, rotate_at, chunks,
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
    /\ UNCHANGED <<ring_vars, writer_vars, hdr_id, hdr_size, issued, inbox, revoked, rotate_at,
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
    /\ UNCHANGED <<ring_vars, writer_vars, mem_vars, issued, inbox, revoked, rotate_at, chunks,
                   nissued>>

\* drop_delivery(reader): environment (LOSSY): a delivery is never read
\* (request aborted, reader gone).  Not a call on the storage.
drop_delivery(r) ==
    /\ LOSSY
    /\ \E h \in DOMAIN inbox[r] :
          /\ inbox' = [inbox EXCEPT ![r] = BagTake(@, h)]
          /\ last_action' = [name |-> "drop_delivery", reader |-> r,
                             handle |-> h, outcome |-> "ok"]
    /\ UNCHANGED <<ring_vars, writer_vars, mem_vars, issued, revoked, rotate_at, rd, chunks,
                   nissued>>

=============================================================================
