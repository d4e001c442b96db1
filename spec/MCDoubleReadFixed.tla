------------------------------ MODULE MCDoubleReadFixed ------------------------------
(***************************************************************************)
(* Must-pass model: FIXED protocol when A1 does NOT hold (a reader may     *)
(* read a delivery twice or read a handle it was not sent). With F2 the    *)
(* premature reclamation that a double read causes never yields a foreign  *)
(* value or a corrupted count: the other reader gets "stale" (ValueError)  *)
(* instead. Holds only because get_end (re-check + increment) is ONE step  *)
(* here; in the real code the writer does not take the reader lock         *)
(* (MCEndWindow fails). A3 with not-A1 means no id is ever reused (every   *)
(* issued handle stays outstanding), hence ID_MAX = 5 > number of puts.    *)
(* Bounds: N = 3, MAX_OBJ = 2, sizes 1..2, 2 keys, 2 readers, 2 issuances; *)
(* re-reads make the counts unbounded, so the state constraint CountBound  *)
(* stops exploring once a cell's count exceeds MaxIssues * R = 4 (enough   *)
(* to reclaim any chunk and to over-read a once-issued chunk twice).       *)
(* Weakens: more re-reads, bigger rings, 3+ issuances (N = 4 with 3        *)
(* issuances: > 1.6 M distinct states, not finished in 2 minutes).         *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2   \* model values

MCForged == {}

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)

\* Re-reads (not A1) can increment a count without bound: stop there.
CountBound == \A c \in Cells : count[c] <= MaxIssues * R
=============================================================================
