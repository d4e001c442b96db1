"""The lowest layer: where things are (paths), the one table of names
(vocabulary), the words of a verdict (levels) and which suite test makes up
which property (suitegroups), the one table renderer, and files written
whole (files). It imports nothing else of shmref."""
