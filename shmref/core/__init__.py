"""The lowest layer: where things are (paths), the one table of names
(vocabulary) and the one table renderer. It imports nothing else of shmref."""
