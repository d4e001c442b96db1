---------------------------- MODULE AbstractCache ----------------------------
(***************************************************************************)
(* What the object store is for, without memory: a cache from handles to   *)
(* values.  Put issues a handle for a value (a re-issued handle names the  *)
(* latest value); a get of an issued handle returns the value put under    *)
(* it, or fails; nothing else is observable.  `got` is the outcome of the  *)
(* last step: <<handle, value>> after a successful get, <<>> otherwise.    *)
(*                                                                         *)
(* ShmObjectStorage refines it (AbstractSpec there, with the refinement    *)
(* mapping cache <- the values of the issued handles, got <- the last      *)
(* get_end that returned ok).  Checked by TLC as a PROPERTY of the         *)
(* must-pass storage models; a spec whose reads can return another value   *)
(* fails it (tests/test_check.py).                                         *)
(***************************************************************************)
EXTENDS Sequences

VARIABLES cache, got

Init == cache = [h \in {} |-> 0] /\ got = <<>>

\* Issue a handle (new, or again for the same value, or for a new value
\* after the ids wrapped): only that handle's entry changes.
Put == /\ \E h \in DOMAIN cache' :
              cache' = [x \in DOMAIN cache \cup {h} |->
                          IF x = h THEN cache'[h] ELSE cache[x]]
       /\ got' = <<>>

\* A get of an issued handle that returns the value put under it.
Get == /\ \E h \in DOMAIN cache : got' = <<h, cache[h]>>
       /\ cache' = cache

\* A failed get, or any step that shows nothing.
Quiet == got' = <<>> /\ cache' = cache

Next == Put \/ Get \/ Quiet

Spec == Init /\ [][Next]_<<cache, got>>
=============================================================================
