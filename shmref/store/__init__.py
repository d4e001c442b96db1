"""Driving a store: the Driver (one method per action of the spec), reader
processes, split reads, the pure model beside it and the segment's bytes
observed."""
