------------------------- MODULE StorageSignatures -------------------------
(***************************************************************************)
(* HMAC-signed handles, abstracted.  A handle <<key, address, id>>         *)
(* verifies iff the writer issued it (`issued`) and the secret has not     *)
(* rotated since (F4, ROTATE).  Issuing a handle signs it and delivers it  *)
(* to every reader's inbox; a rotation moves the pending deliveries to     *)
(* `revoked`, where a get of one is rejected.                              *)
(***************************************************************************)
EXTENDS StorageState

\* F4 (refimpl): clear() keeps the secret, so a delivery pending at the
\* clear still reads its own chunk until the address is reused (then the id
\* check rejects it).  It leaves a fence at the oldest id it forgets
\* (ClearFence); the put that issues that id again first writes a new
\* secret, so every delivery pending then moves to `revoked` (RotateAt):
\* no handle signed before the clear can name the new chunk.  A definition
\* (TRUE with FIXED), overridden in a cfg with `ROTATE <- MCNoRotate`, so
\* that other cfgs and generated trace cfgs need not name it.
ROTATE == FIXED

\* Issue handle h (of a chunk of `size` cells) to every reader.
Issue(h, size) ==
    /\ issued' = Extend(issued, h, size)
    /\ inbox' = [r \in Readers |-> BagAdd(inbox[r], h)]
    /\ UNCHANGED <<revoked, rotate_at>>
    /\ nissued' = nissued + 1

\* put's issue of the handle h of a new chunk: if its id is the fence, the
\* secret rotates first (allocate_buf), revoking every pending delivery.
IssueNew(h, size) ==
    IF ROTATE /\ h[3] = rotate_at
    THEN /\ issued' = Extend(issued, h, size)
         /\ inbox' = [r \in Readers |-> BagAdd(EmptyFn, h)]
         /\ revoked' = [r \in Readers |-> BagUnion(revoked[r], inbox[r])]
         /\ rotate_at' = NoId
         /\ nissued' = nissued + 1
    ELSE Issue(h, size)

\* get's signature check: rejected if the writer never issued h, or
\* signed it before a clear that rotated the secret.
Verifies(h, revokedSig) == ~revokedSig /\ h \in DOMAIN issued

\* clear()'s part under ROTATE (F4): a fence at the oldest id it forgets,
\* unless one is pending (the id counter reaches the older fence first).
ClearFence ==
    IF ROTATE /\ rotate_at = NoId /\ metadata # EmptyFn
    THEN rotate_at' = monotonic_id_start
    ELSE UNCHANGED rotate_at

\* The handles a reader may present: delivered, revoked, issued, forged.
HandleSpace == UNION {DOMAIN inbox[r] \cup DOMAIN revoked[r] : r \in Readers}
               \cup DOMAIN issued \cup Forged
=============================================================================
