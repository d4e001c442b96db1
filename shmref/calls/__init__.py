"""A test's calls on a store, recorded for the report's picture of it, in two
modules: `calltrace` catches the calls a failing property made (the wrappers
on the implementation's classes, and a pytest plugin for any test), and
`drawing` makes what the picture shows of them (a call's text, the ring the
calls placed, the stream that outlives a crash) and of a state machine's
steps. The oracle and the suite use these; implementers' building blocks
are in shmref.testing."""
