---- MODULE Inv ----
\* Invariant violation whose trace carries every value shape the parser must
\* handle: sequence, set, function over model values, record, negative
\* integers, a string with an escaped quote, and an empty function.
EXTENDS Integers, Sequences
CONSTANTS Keys, NoKey
VARIABLES log, seen, table, key_index, last_action, neg
vars == <<log, seen, table, key_index, last_action, neg>>
Init == /\ log = <<>>
        /\ seen = {}
        /\ table = [k \in Keys |-> 0]
        /\ key_index = [k \in {} |-> NoKey]
        /\ last_action = [name |-> "init"]
        /\ neg = -1
put(k) == /\ log' = Append(log, <<k, "v\"q">>)
          /\ seen' = seen \cup {k}
          /\ table' = [table EXCEPT ![k] = @ + 1]
          /\ key_index' = [x \in DOMAIN key_index \cup {k} |->
                             IF x = k THEN <<Len(log), neg>> ELSE key_index[x]]
          /\ last_action' = [name |-> "put", key |-> k, outcome |-> "ok"]
          /\ neg' = neg - 1
Next == \E k \in Keys : put(k)
Small == Len(log) < 3
====
