"""A side of the mixed deployments (vllmcheck.sides): refimpl's classes, writing
and reading with the release's MsgpackSerde by default."""

from __future__ import annotations

from vllmcheck.sides import side

globals().update(side(__name__, base="refimpl", writes="release", reads="release"))
