"""Tools that write documents: FINDINGS.md's tables, the audit's coverage,
the seed's conformance snapshot and DESIGN.md's vocabulary."""
