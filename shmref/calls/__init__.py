"""A test's calls on a store, recorded for the report's picture of it: the
calls a failing property made (`calltrace`; their text: `calltext`; the ring
they placed: `callring`; streamed for a crash: `callstream`; for any test:
`callplugin`) and a state machine's drawn steps (`drawn`). The oracle and the
suite use these; implementers' building blocks are in shmref.testing."""
