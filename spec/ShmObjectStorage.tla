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
(* count is inflated, if another chunk's payload sits there that payload   *)
(* is corrupted.  Payload bytes never look like a header (hdr_id = NoId).  *)
(*                                                                         *)
(* Handles are <<key, address, id>>.  HMAC signatures are abstracted: a    *)
(* handle verifies iff the writer issued it (`issued`) and, under F4       *)
(* (ROTATE), no clear() changed the secret since.  Handles travel to each  *)
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
(*             copy failed still increments), F4 (ROTATE: clear() rotates  *)
(*             the signing secret).                                        *)
(*                                                                         *)
(* Atomicity: every writer operation (put with its free_unused retry,      *)
(* free_unused, clear) is one step; a read is three steps (get_begin,      *)
(* get_copy, get_end) so the writer can act in between.  get_end (re-check *)
(* under FIXED and increment) is ONE step: the writer does not take the    *)
(* reader lock, so in the real code a writer step can fall between the     *)
(* re-check and the increment.  SPLIT_END (a definition, FALSE here; a     *)
(* model overrides it with `SPLIT_END <- MCSplitEnd`) models that window:  *)
(* get_check (F2's re-check) and get_end (the increment) become two steps. *)
(*                                                                         *)
(* The parts, one concern each:                                            *)
(*   StorageState       constants, variables, shared helpers, Init         *)
(*   StorageSignatures  signed handles, issue, F4 secret rotation          *)
(*   StorageAlloc       the allocator's use: free_unused, allocate, write  *)
(*   StorageWriter      put, get_cached, touch, release_touches,           *)
(*                      free_unused                                        *)
(*   StorageClear       clear()                                            *)
(*   StorageReader      get_begin, get_copy, get_check, get_end,           *)
(*                      drop_delivery                                      *)
(*   StorageProperties  TypeOk, invariants, refinement, liveness           *)
(* This module composes them: Next, Spec and the fairness of FairSpec.     *)
(***************************************************************************)
EXTENDS StorageWriter, StorageClear, StorageReader, StorageProperties

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
=============================================================================
