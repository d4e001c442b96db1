------------------------- MODULE StorageSignatures -------------------------
(***************************************************************************)
(* HMAC-signed handles, abstracted.  A handle <<key, address, id>>         *)
(* verifies iff the writer issued it (`issued`) and no clear() rotated     *)
(* the secret since (F4, ROTATE).  Issuing a handle signs it and delivers  *)
(* it to every reader's inbox; a rotation moves the pending deliveries     *)
(* to `revoked`, where a get of one is rejected.                           *)
(***************************************************************************)
EXTENDS StorageState

\* F4 (refimpl): clear() writes a new handle-signing secret, so a handle
\* signed before the clear no longer verifies: its pending deliveries move
\* to `revoked` and a get of one is rejected.  A definition (TRUE with
\* FIXED), overridden in a cfg with `ROTATE <- MCNoRotate`, so that other
\* cfgs and generated trace cfgs need not name it.
ROTATE == FIXED

\* Issue handle h (of a chunk of `size` cells) to every reader.
Issue(h, size) ==
    /\ issued' = Extend(issued, h, size)
    /\ inbox' = [r \in Readers |-> BagAdd(inbox[r], h)]
    /\ UNCHANGED revoked
    /\ nissued' = nissued + 1

\* get's signature check: rejected if the writer never issued h, or
\* signed it before a clear that rotated the secret.
Verifies(h, revokedSig) == ~revokedSig /\ h \in DOMAIN issued

\* clear()'s part under ROTATE (F4): a new secret, so every delivery still
\* pending was signed with the old one and is revoked.
RotateSecret ==
    IF ROTATE
    THEN /\ revoked' = [r \in Readers |-> BagUnion(revoked[r], inbox[r])]
         /\ inbox' = [r \in Readers |-> EmptyFn]
    ELSE UNCHANGED <<inbox, revoked>>

\* The handles a reader may present: delivered, revoked, issued, forged.
HandleSpace == UNION {DOMAIN inbox[r] \cup DOMAIN revoked[r] : r \in Readers}
               \cup DOMAIN issued \cup Forged
=============================================================================
