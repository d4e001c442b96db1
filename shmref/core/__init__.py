"""The lowest layer: where things are (paths), the one table of names
(vocabulary), the words of a verdict (levels) and which suite test makes up
which property (suitegroups), the one table renderer, files written whole
(files), a run's configuration (runconfig) and what the extra
`shmref[oracle]` adds (extras). It imports nothing else of shmref."""
