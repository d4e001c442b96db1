"""What a run of the suite is held to and run with, in every process that
runs it (the oracle's workers, a user's pytest session, the bench): the
Hypothesis profiles, the shrink budget, the guard that charges each
shared-memory segment to the test that made it, and the audit of the
segments a process made. Not the implementers' toolkit (shmref.testing)."""
