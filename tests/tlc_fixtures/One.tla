---- MODULE One ----
\* A single variable: TLC prints "n = 0" without the "/\ " prefix.
EXTENDS Naturals
VARIABLE n
Init == n = 0
step == n' = (n + 1) % 3
Spec == Init /\ [][step]_n
Reach == <>(n = 5)
Low == n < 2
====
