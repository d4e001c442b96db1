------------------------------ MODULE MCIdWrap ------------------------------
(***************************************************************************)
(* H-IdWrap / ABA (must FAIL ReadsReturnPutValue): a delivery held back    *)
(* across clear()s until the ids wrap; a new chunk with the same id sits   *)
(* at the same address, the id check (and F2's re-check) pass, the reader  *)
(* gets another key's value.  Run on the FIXED protocol: F1-F3 do not      *)
(* close it; F4 (ROTATE, secret rotation on clear) does: this model turns *)
(* it off (refimpl before F4); MCIdWrapFixed is the same hazard with F4.   *)
(* Bounds: N = 2, ID_MAX = 2, sizes 1, 3 keys, 1 reader, 3 issuances.      *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2, k3   \* model values

MCForged == {}

\* refimpl without F4: clear() keeps the handle-signing secret.
MCNoRotate == FALSE

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)
=============================================================================
