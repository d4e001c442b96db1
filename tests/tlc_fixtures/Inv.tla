---- MODULE Inv ----
EXTENDS Integers, Sequences
CONSTANTS Keys, NoKey
VARIABLES log, seen, table, last_action, neg
vars == <<log, seen, table, last_action, neg>>
Init == /\ log = <<>>
        /\ seen = {}
        /\ table = [k \in Keys |-> 0]
        /\ last_action = [name |-> "init"]
        /\ neg = -1
put(k) == /\ log' = Append(log, <<k, "v\"q">>)
          /\ seen' = seen \cup {k}
          /\ table' = [table EXCEPT ![k] = @ + 1]
          /\ last_action' = [name |-> "put", key |-> k, outcome |-> "ok"]
          /\ neg' = neg - 1
Next == \E k \in Keys : put(k)
Small == Len(log) < 3
====
