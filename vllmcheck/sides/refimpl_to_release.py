"""A side of the mixed deployments (vllmcheck.sides): refimpl's classes writing
with refimpl's MsgpackSerde, their readers decoding with the release's."""

from __future__ import annotations

from vllmcheck.sides import side

globals().update(side(__name__, base="refimpl", writes="refimpl", reads="release"))
