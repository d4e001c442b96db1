------------------------------ MODULE MCIdCollision ------------------------------
(***************************************************************************)
(* H-IdCollision (must FAIL LiveIdsDistinct): more than ID_MAX - 1 live    *)
(* chunks.  With ID_MAX = 2 and a ring of 3 cells the third put gets id 0  *)
(* while chunk 0 is live: metadata[0] is overwritten, two live chunks      *)
(* carry id 0 (and with ID_MAX live chunks the freed-id range comes out    *)
(* empty).                                                                 *)
(* Bounds: N = 3, sizes 1, 3 keys, 1 reader, 3 issuances.                  *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2, k3   \* model values

MCForged == {}

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)
=============================================================================
