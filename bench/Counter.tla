------------------------------ MODULE Counter ------------------------------
(* A trivial spec for TLC's baseline throughput on this machine: two      *)
(* counters modulo M, M*M distinct states, two successors each.           *)
EXTENDS Naturals
CONSTANT M
VARIABLES x, y
Init == x = 0 /\ y = 0
Next == \/ x' = (x + 1) % M /\ y' = y
        \/ y' = (y + 1) % M /\ x' = x
TypeOk == x \in 0..(M - 1) /\ y \in 0..(M - 1)
=============================================================================
