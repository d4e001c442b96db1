---- MODULE Assume ----
EXTENDS Naturals
CONSTANT K
ASSUME KPositive == K > 0
VARIABLE x
Init == x = K
Next == UNCHANGED x
====
