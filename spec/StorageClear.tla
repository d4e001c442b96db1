---------------------------- MODULE StorageClear ----------------------------
(***************************************************************************)
(* clear(): when the writer may call it (CLEAR_WHEN), what it resets,      *)
(* and what it leaves: memory, the deliveries still draining (under F4,   *)
(* revoked only when the ids come back: ClearFence), the reads in flight.  *)
(***************************************************************************)
EXTENDS StorageSignatures

\* clear(): ring.clear() and the writer's maps.  Memory is untouched;
\* deliveries already sent stay in the inboxes (requests still draining).
\* ROTATE (F4): the secret stays; a fence at the oldest forgotten id.
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
    /\ ClearFence
    /\ last_action' = [name |-> "clear", outcome |-> "ok"]
    /\ UNCHANGED <<monotonic_id_end, mem_vars, issued, inbox, revoked, rd, nissued>>

=============================================================================
