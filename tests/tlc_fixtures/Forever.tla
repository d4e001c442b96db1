---- MODULE Forever ----
\* Unbounded state space: only a timeout stops TLC.
EXTENDS Naturals
VARIABLE x
Init == x = 0
Next == x' = x + 1
====
