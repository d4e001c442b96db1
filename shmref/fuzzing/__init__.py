"""The bad-input fuzz of every public method (the hardened property):
`python -m shmref fuzz`."""
