"""Traces: TLC traces replayed on a store, runs of a store recorded and
validated by TLC, and both as ITF files."""
