------------------------------ MODULE MCCopyFailFixed ------------------------------
(***************************************************************************)
(* Must-pass liveness of the FIXED protocol with failing deserialization:  *)
(* F3 increments even when the copy failed, so nothing is pinned.          *)
(* Bounds: as MCLive.                                                      *)
(***************************************************************************)
EXTENDS ShmObjectStorage

CONSTANTS k1, k2   \* model values

MCForged == {}

\* Readers are interchangeable (no constant names one).
ReaderSymmetry == Permutations(Readers)
=============================================================================
