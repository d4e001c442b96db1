------------------------ MODULE TraceShmObjectStorage ------------------------
(***************************************************************************)
(* Trace validation (implementation -> spec), as CCF and etcd-raft do it.  *)
(*                                                                         *)
(* TraceLog(j), j \in 1..TraceLen (log[j] below), are the records that     *)
(* shmref.traces.recording wrote while an implementation ran: each names a *)
(* spec action (DESIGN.md), carries its arguments in units and the outcome *)
(* the implementation showed, e.g.                                         *)
(*   [name |-> "put", key |-> "a", size |-> 2, outcome |-> "ok",           *)
(*    handle |-> <<"a", 0, 0>>]                                            *)
(*   [name |-> "get_end", reader |-> 0, handle |-> <<"a", 0, 0>>,          *)
(*    outcome |-> "ok", value |-> "a"]                                     *)
(* A generated module (build/trace/...) EXTENDS this one, defines the log  *)
(* and the constants, and its cfg checks the invariant TraceIncomplete.   *)
(*                                                                         *)
(* TraceObs(j) (optional) gives, per log entry, the implementation's      *)
(* state after the call: a record of some of ObsNow's fields (the ring's   *)
(* start/end/ids/metadata, the writer's maps, counts per chunk id, all in  *)
(* units); step i must end in a state that shows them.                     *)
(*                                                                         *)
(* Step i of the behaviour must take the spec action that log[i] names,    *)
(* with log[i]'s arguments, and end with a last_action that agrees with    *)
(* every field of log[i] (outcome, handle, freed ids; `value` is the key   *)
(* whose value the read returned, or "<foreign>").  The only other steps   *)
(* are stutters for calls that the spec leaves out because they change     *)
(* nothing (NoOp below).  So every behaviour of TraceSpec is a behaviour   *)
(* of ShmObjectStorage's Spec (its steps are Next or UNCHANGED vars) that  *)
(* performs the log, entry by entry.                                       *)
(*                                                                         *)
(* TLC explores TraceSpec; the invariant TraceIncomplete (i <= TraceLen)   *)
(* is violated exactly when some behaviour has matched the whole log:      *)
(*   invariant TraceIncomplete violated  =>  the log is ACCEPTED           *)
(*   TLC finishes without violation      =>  the log is REJECTED; the      *)
(*   search depth D says that log[1..D-1] matched and log[D] cannot.       *)
(* Run TLC with -deadlock: a branch that cannot go on is not an error.    *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANT TraceLen     \* the number of log entries
CONSTANT TraceLog(_)  \* j -> the j-th log entry (see above); an operator, not
                      \* a sequence: TLC would rebuild a sequence at every access
CONSTANT TraceObs(_)  \* j -> the state observed after log entry j (a
                      \* record), or EmptyFn if none

VARIABLE i          \* the next log entry to match

tvars == <<vars, i>>

\* The spec action a log entry names, with the entry's arguments.
Perform(e) ==
    CASE e.name = "put"             -> put(e.key, e.size)
      [] e.name = "get_cached"      -> get_cached(e.key)
      [] e.name = "touch"           -> touch(e.key)
      [] e.name = "release_touches" -> release_touches
      [] e.name = "free_unused"     -> free_unused
      [] e.name = "clear"           -> clear
      [] e.name = "get_begin"       -> GetBegin(e.reader, e.handle)
      [] e.name = "get_copy"        -> get_copy(e.reader)
      [] e.name = "get_end"         -> get_end(e.reader)
      [] OTHER                      -> FALSE

\* The value a read returned (a sequence of the cells' owners) is the value
\* of key v, or ("<foreign>") of no key at all.
ValueMatches(v, got) ==
    IF v = "<foreign>"
    THEN ~\E k \in Keys : got = [j \in 1..Len(got) |-> k] /\ Len(got) > 0
    ELSE Len(got) > 0 /\ got = [j \in 1..Len(got) |-> v]

\* The step's last_action agrees with every field the log recorded.
\* (IF, not \/ or =>: TLC explores every disjunct of an action as a branch.)
Matches(e) ==
    /\ \A f \in (DOMAIN e) \ {"value"} :
          f \in DOMAIN last_action' /\ last_action'[f] = e[f]
    /\ IF "value" \in DOMAIN e
       THEN "value" \in DOMAIN last_action' /\ ValueMatches(e.value, last_action'.value)
       ELSE TRUE

\* e[f] = v, or e has no field f.  A diagnosis probe
\* (shmref.traces.tracecheck) gives only a call's name and arguments, to ask
\* which results the spec allows; recorded entries always carry their results.
Has(e, f, v) == IF f \in DOMAIN e THEN e[f] = v ELSE TRUE
HasNot(e, f, v) == IF f \in DOMAIN e THEN e[f] # v ELSE TRUE

\* Calls the spec does not model because they change nothing: the
\* implementation returned without effect (a stutter step).
NoOp(e) ==
    CASE e.name = "free_unused" ->
            /\ Has(e, "outcome", "ok")
            /\ FreeUnusedOn(Cur).s.md = metadata
            /\ Has(e, "freed", <<>>)
      [] e.name = "release_touches" -> Has(e, "outcome", "ok") /\ touched = {}
      [] e.name = "touch" ->
            /\ Has(e, "outcome", "ok")
            /\ IF e.key \in DOMAIN key_index
               THEN key_index[e.key][2] \in touched
               ELSE TRUE
      [] e.name = "get_cached" -> HasNot(e, "outcome", "ok") /\ e.key \notin DOMAIN key_index
      [] OTHER -> FALSE

\* What an implementation can show of a state (in units); functions as
\* their graphs (sets of <<x, f[x]>>); counts are per live chunk id: the
\* count field at the chunk's header cell.
Graph(f) == {<<x, f[x]>> : x \in DOMAIN f}
ObsNow == [data_buffer_start |-> data_buffer_start,
           data_buffer_end |-> data_buffer_end,
           monotonic_id_start |-> monotonic_id_start,
           monotonic_id_end |-> monotonic_id_end,
           metadata |-> Graph(metadata), key_index |-> Graph(key_index),
           writer_flag |-> Graph(writer_flag), touched |-> touched,
           counts |-> {<<id, count[metadata[id] % N]>> : id \in DOMAIN metadata}]

\* The state after step j shows what the implementation showed after log[j].
Observed(j) ==
    LET seen == TraceObs(j)
    IN  IF DOMAIN seen = {}
        THEN TRUE
        ELSE LET now == ObsNow' IN \A v \in DOMAIN seen : now[v] = seen[v]

TraceInit == Init /\ i = 1

TraceNext ==
    /\ i <= TraceLen
    /\ LET e == TraceLog(i)
       IN  \/ Perform(e) /\ Matches(e)
           \/ NoOp(e) /\ UNCHANGED vars
    /\ Observed(i)
    /\ i' = i + 1

TraceSpec == TraceInit /\ [][TraceNext]_tvars

\* Violated iff the whole log was matched (see the header).
TraceIncomplete == i <= TraceLen

=============================================================================
