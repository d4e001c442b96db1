------------------------------ MODULE MCCopyFail ------------------------------
(***************************************************************************)
(* H-LostReader, deserialize face (must FAIL EveryPutReclaimable):         *)
(* get_copy raises, the seed's get skips the increment, the chunk is       *)
(* pinned forever.                                                         *)
(* Bounds: as MCLive.                                                      *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2   \* model values

MCForged == {}

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)
=============================================================================
