---- MODULE Live ----
EXTENDS Naturals
VARIABLE n
Init == n = 0
step == n' = (n + 1) % 3
FairSpec == Init /\ [][step]_n /\ WF_n(step)
LazySpec == Init /\ [][step]_n
Reach == <>(n = 5)
====
