"""CrossHair contracts on the allocator arithmetic; `python -m proofs` runs them."""
