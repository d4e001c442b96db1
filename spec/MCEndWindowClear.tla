--------------------------- MODULE MCEndWindowClear ---------------------------
(***************************************************************************)
(* Hazard model H-EndWindow via clear (F2 residual): FIXED protocol WITH   *)
(* A1, get_end split into get_check (re-check) and the increment as in     *)
(* MCEndWindow, clear() allowed while deliveries are pending (no read in   *)
(* flight).  Expected to FAIL CountsSound: a draining read begins after    *)
(* the clear, passes F2's re-check, a put reuses the cell, the increment  *)
(* lands on the new chunk's count.  So with the real (non-atomic) get_end *)
(* FIXED does NOT make clear() safe at any time for the counts: A2 (a      *)
(* quiescent clear) is still needed.  MCStorageFixed (atomic get_end)     *)
(* passes with clear at any time.                                          *)
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
