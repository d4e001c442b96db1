---- MODULE Bad ----
\* Parse error on purpose: Init has no right-hand side.
VARIABLE x
Init == x = 
Next == x' = x
====
