"""The lowest layer: where things are (paths), the one table of names
(vocabulary), the one table renderer and what the extra `shmref[oracle]`
adds (extras). It imports nothing else of shmref."""
