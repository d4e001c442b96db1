------------------------------ MODULE MCDoubleReadFixed ------------------------------
(***************************************************************************)
(* Must-pass model: FIXED protocol when A1 does NOT hold (a reader may     *)
(* read a delivery twice or read a handle it was not sent).  With F2 the   *)
(* premature reclamation that a double read causes never yields a foreign  *)
(* value or a corrupted count: the other reader gets "stale" (ValueError)  *)
(* instead. Holds only because get_end (re-check + increment) is ONE step  *)
(* here; in the real code the writer does not take the reader lock (see    *)
(* README). A3 with not-A1 means no id is ever reused (every issued handle *)
(* stays outstanding), hence ID_MAX = 5 > number of puts.                  *)
(* Bounds: N = 4, MAX_OBJ = 2, sizes 1..2, 2 keys, 2 readers, 3 issuances. *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2   \* model values

MCForged == {}

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)
=============================================================================
