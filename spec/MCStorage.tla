------------------------------ MODULE MCStorage ------------------------------
(***************************************************************************)
(* The one model module of ShmObjectStorage.tla: every storage model is a  *)
(* cfg on it (spec/models.toml names them).  A cfg gives the bounds and    *)
(* the switches as constants, chooses the forged handles below, and        *)
(* overrides the spec's definitions SPLIT_END, ROTATE and MIMIC where the  *)
(* model needs them; its comments say what the bounds weaken and what the *)
(* model shows.                                                            *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2   \* model values (cfgs may name more keys in Keys)

\* Forged handles (`Forged <- ...`): none; k2 at the first chunk's address
\* and id; every key there; k2 there and k1 at cell 1 with id 1.  The writer never issued them
\* unless a put happens to, so get must reject them otherwise.
MCForged == {}
MCForgedFirst == {<<k2, 0, 0>>}
MCForgedFirstAny == {<<k, 0, 0>> : k \in Keys}  \* every key: keeps key symmetry
MCForgedTwo == {<<k2, 0, 0>>, <<k1, 1, 1>>}

\* Units wider than 16 bytes (`UNIT_BYTES <- MCWideUnit`): a store whose
\* serde needs more room per object; every unit of 32 bytes or more gives
\* the same free target in units (StorageAlloc's FreeTarget).
MCWideUnit == 32

\* `SPLIT_END <- MCSplitEnd`: get_end's re-check and increment are two
\* steps (the writer has no reader lock: the H-EndWindow window).
MCSplitEnd == TRUE

\* `ROTATE <- MCNoRotate`: refimpl without F4 (clear keeps the secret).
MCNoRotate == FALSE

\* `MIMIC <- MCMimic`: a put's payload may hold bytes that read as a header.
MCMimic == TRUE

\* Readers are interchangeable (no constant names one); for invariants
\* only (symmetry is unsound for liveness).
ReaderSymmetry == Permutations(Readers)

\* Keys are interchangeable too where no forged handle names one (Forged
\* <- MCForged): nothing in Next picks a key by name or by CHOOSE, and
\* Value(k, s) treats every key alike.  TLC builds the group from the
\* union.  tests/test_symmetry.py checks the whole state graph of a small
\* instance of each model that uses these for closure under every
\* permutation of Keys and Readers.
KeySymmetry == Permutations(Keys)
KeyReaderSymmetry == Permutations(Keys) \cup Permutations(Readers)

\* Without A1 re-reads increment a count without bound: a state constraint
\* stops exploring beyond MaxIssues * R.
CountBound == \A c \in Cells : count[c] <= MaxIssues * R
=============================================================================
