--------------------------- MODULE MCEndWindowClear ---------------------------
(***************************************************************************)
(* Hazard model H-EndWindow via clear (F2 residual): FIXED protocol WITH   *)
(* A1, get_end split into get_check (re-check) and the increment as in     *)
(* MCEndWindow: the code when the WRITER HAS NO READER LOCK (refimpl's     *)
(* put/free_unused take it when given it, as vLLM does).  clear() at any   *)
(* time.  Expected to FAIL CountsSound: a read in flight passes F2's       *)
(* re-check, clear, a put reuses the cell, the increment lands on the new  *)
(* chunk's count.  (With deliveries pending only, F4 rejects the draining  *)
(* reads: that variant passes since F4.)                                   *)
(* Bounds: as MCStorageFixedSmall: N = 3, MAX_OBJ = 2, sizes 1..2, 2 keys, *)
(* 2 readers, 2 issuances, ID_MAX = 3.                                     *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2   \* model values

MCForged == {<<k2, 0, 0>>}

MCSplitEnd == TRUE

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)
=============================================================================
