"""What a run of the suite is held to and run with, in every process that
runs it (the oracle's workers, a user's pytest session, the bench): the
Hypothesis profiles, the shrink budget, the guard that charges each
shared-memory segment to the test that made it, the audit of the
segments a process made, and the implementation a worker gives its suite
run already loaded (given). Not the implementers' toolkit (shmref.testing)."""
