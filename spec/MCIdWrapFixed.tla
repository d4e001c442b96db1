---------------------------- MODULE MCIdWrapFixed ----------------------------
(***************************************************************************)
(* Ids wrap in a must-pass model (issue 15, item 2): A3 OFF, more          *)
(* issuances than ID_MAX, clear() with deliveries pending, refimpl's       *)
(* protocol (FIXED: F1-F3, and F4: clear rotates the signing secret, so a  *)
(* delivery signed before the clear is rejected).  The cfg MCIdWrapSeed    *)
(* runs the same bounds on the seed (FIXED = FALSE: no F1-F4) and must     *)
(* fail ReadsReturnPutValue.                                               *)
(* Bounds: N = 2 cells, ID_MAX = 3, sizes 1, 2 keys, 2 readers (one         *)
(* symmetry class), 4 issuances (> ID_MAX: every id is issued again after  *)
(* a wrap).  Clear only with no read in flight (CLEAR_WHEN =               *)
(* "no_read_in_flight"): a read that began before a clear and ends after   *)
(* the ids wrapped back to its id at its address is not closed by F4      *)
(* (spec/README.md, assumption A2').                                        *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2   \* model values

MCForged == {}

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)
=============================================================================
