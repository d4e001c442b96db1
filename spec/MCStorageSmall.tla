------------------------------ MODULE MCStorageSmall ------------------------------
(***************************************************************************)
(* Small must-pass model (for --quick): as MCStorage, plus forged handles  *)
(* (k2 at the first chunk's address and id, k1 at cell 1 with id 1), which *)
(* must be rejected unless the writer really issued them.                  *)
(* Bounds: N = 3, MAX_OBJ = 2, ID_MAX = 4, 2 keys, 2 readers, 2 issuances. *)
(* Weakens: everything MCStorage weakens, more so.                         *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2   \* model values

MCForged == {<<k2, 0, 0>>, <<k1, 1, 1>>}

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)
=============================================================================
