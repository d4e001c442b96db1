---------------------------- MODULE MCPayloadHeader ----------------------------
(***************************************************************************)
(* Header and payload share cells (issue 15, item 4): with MIMIC, a new    *)
(* chunk's payload may hold bytes that read as a header (id, size) at any  *)
(* of its cells.  refimpl's protocol (FIXED: F1-F4, atomic get_end), A1,   *)
(* A3.  This cfg: clear at any time; must FAIL ReadsReturnPutValue: a read *)
(* in flight across a clear, a put whose payload reproduces the old        *)
(* header at the handle's address, F2's re-check passes, the reader        *)
(* returns the new payload (FINDINGS #10, residual).  MCPayloadHeaderDrain *)
(* (same module): clear with deliveries pending but no read in flight;     *)
(* must pass: F4 rejects every delivery signed before the clear, so no     *)
(* look-alike header is ever trusted.                                      *)
(* Bounds: N = 3, ID_MAX = 3, sizes 1..2, 2 keys, 1 reader, 3 issuances.   *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2   \* model values

MCForged == {}

MCMimic == TRUE
=============================================================================
