"""native_store's C mutants, one module each: `--impl native_mutants.<name>`
(build them first: `make native-mutants`). See build.py's MUTANTS."""
