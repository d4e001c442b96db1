---- MODULE Live ----
\* Liveness: FairSpec (Live.cfg) loops 0 -> 1 -> 2 -> 0 (a lasso); LazySpec
\* (Stutter.cfg) stutters in the initial state.
EXTENDS Naturals
VARIABLE n
Init == n = 0
step == n' = (n + 1) % 3
FairSpec == Init /\ [][step]_n /\ WF_n(step)
LazySpec == Init /\ [][step]_n
Reach == <>(n = 5)
====
