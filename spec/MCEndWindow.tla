------------------------------ MODULE MCEndWindow ------------------------------
(***************************************************************************)
(* Hazard model H-EndWindow (F2 residual): FIXED protocol without A1, with *)
(* get_end split into get_check (F2's re-check of the header id, under the *)
(* reader lock) and the increment, so a writer step can fall in between   *)
(* (the writer never takes the reader lock).  Expected to FAIL CountsSound:*)
(* a double read reclaims the chunk while another reader sits between its *)
(* passed re-check and its increment; a put reuses the cell; the late     *)
(* increment lands on the new chunk's count.                              *)
(* Bounds: N = 1 (every chunk at cell 0), MAX_OBJ = 1, size 1, 2 keys,     *)
(* 2 readers, 2 issuances.                                                 *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2   \* model values

MCForged == {}

MCSplitEnd == TRUE
=============================================================================
