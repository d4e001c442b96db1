------------------------------ MODULE MCLostReader ------------------------------
(***************************************************************************)
(* H-LostReader (must FAIL EveryPutReclaimable): a delivery is never read  *)
(* (request aborted, reader gone): the count never reaches writer_flag *   *)
(* R, the chunk stays pinned and FIFO reclamation stops at it forever.     *)
(* Bounds: as MCLive.                                                      *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2   \* model values

MCForged == {}

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)
=============================================================================
