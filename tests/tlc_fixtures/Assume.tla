---- MODULE Assume ----
\* An ASSUME that fails for K = 0 (TLC exit code 10, message 2104).
EXTENDS Naturals
CONSTANT K
ASSUME KPositive == K > 0
VARIABLE x
Init == x = K
Next == UNCHANGED x
====
