---- MODULE Wrap ----
\* Long values that TLC wraps over several lines; a self-loop (idle) and an
\* unnamed disjunct (labelled Next) in the state graph.
EXTENDS Integers
VARIABLES big, y
Init == big = {} /\ y = 0
grow == /\ y < 3
        /\ big' = big \cup {[id |-> i + 100 * y, name |-> "some long string value", flag |-> TRUE, seq |-> <<i, -i, "x">>] : i \in 1..4}
        /\ y' = y + 1
idle == UNCHANGED <<big, y>>
Next == grow \/ idle \/ (y = 3 /\ y' = 4 /\ UNCHANGED big)
Small == y < 4
====
