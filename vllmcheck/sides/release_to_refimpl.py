"""A side of the mixed deployments (vllmcheck.sides): the release's classes
writing with the release's MsgpackSerde, their readers decoding with refimpl's."""

from __future__ import annotations

from vllmcheck.sides import side

globals().update(side(__name__, base="release", writes="release", reads="refimpl"))
