------------------------------ MODULE MCDoubleRead ------------------------------
(***************************************************************************)
(* H-DoubleRead (must FAIL ReadsReturnPutValue): A1 dropped.  One reader   *)
(* reads a delivery twice, the aggregate count reaches writer_flag * R     *)
(* while the other reader is mid-read; the chunk is reclaimed and reused   *)
(* under it and that reader returns a foreign value.                       *)
(* Bounds: N = 2, sizes 1, 2 keys, 2 readers, 2 issuances.                 *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2   \* model values

MCForged == {}

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)
=============================================================================
