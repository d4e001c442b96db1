---- MODULE Pass ----
\* Passes (Bounded holds); without reset (Deadlock.cfg) it deadlocks at x = y = 2.
EXTENDS Naturals
VARIABLES x, y
Init == x = 0 /\ y = 0
incx == x < 2 /\ x' = x + 1 /\ UNCHANGED y
incy == y < 2 /\ y' = y + 1 /\ UNCHANGED x
reset == x = 2 /\ y = 2 /\ x' = 0 /\ y' = 0
Next == incx \/ incy \/ reset
NoReset == incx \/ incy
Spec == Init /\ [][Next]_<<x, y>>
Bounded == x <= 2 /\ y <= 2
====
