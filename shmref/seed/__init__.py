"""The seed and what is built from it: the seed as an importable module
(build), its faithful port (port), its mutants, and loading an implementation
by name (impl: "seed" and "port" are these)."""
