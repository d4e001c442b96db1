------------------------------ MODULE MCStorage ------------------------------
(***************************************************************************)
(* Main must-pass model: the seed's protocol under its assumptions A1      *)
(* (each issuance read exactly once by each reader), A2 (clear only when   *)
(* quiescent: no read in flight, no delivery pending), A3 (ids do not wrap *)
(* while a handle is outstanding). Bounds: ring of N = 5 units; chunks of  *)
(* 1 or 2 units (MAX_OBJ = 2; size 3 exercises put's ValueError); 3 keys;  *)
(* 2 readers; ID_MAX = 5; at most 3 issuances (puts + get_cached):         *)
(* 1,217,303 distinct states, depth 26. Weakens: at most 3 chunks ever     *)
(* exist, so ids never wrap here (wrap is covered by MCRing, MCRingLarge,  *)
(* MCIdWrap) and the ring never holds more than 3 chunks; bigger rings,    *)
(* chunks and reader counts; runs longer than 3 issuances (4 issuances on  *)
(* N = 4 did not finish in 6 minutes: > 2.2 M distinct states at depth     *)
(* 16). No forged handles (see MCStorageSmall). Reader symmetry is sound   *)
(* for invariants.                                                         *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2, k3   \* model values

MCForged == {}

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)
=============================================================================
