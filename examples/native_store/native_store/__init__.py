"""native_store: the seed's API with the ring, headers, counts and copies in C.

The contract's module (shmref.contract): `python -m shmref.conformance
--impl native_store` with examples/native_store on PYTHONPATH, after
`make native`. Mutants of the same C source: `native_mutants.<name>`.
"""

from native_store._bind import bind

bind(globals(), "core")
