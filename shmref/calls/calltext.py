"""A call as a step shows it (shmref.calls.calltrace): its arguments
bound to their names and each value as a short repr, its exception as one
line. Only text is kept: never a reference to an argument or a result."""

from __future__ import annotations

import functools
import inspect
import reprlib
from collections.abc import Callable
from typing import Any

_SHORT = reprlib.Repr()
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxbytes = 22, 22, 16  # type: ignore[attr-defined]
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = 4


def short(value: Any) -> str:
    """A value as a step shows it: its repr, cut; never an error."""
    kind = type(value)
    if kind is int and -(10**15) < value < 10**15 or kind is str and len(value) <= 20:
        return repr(value)  # the common arguments, without reprlib's cost
    if inspect.isfunction(value) or inspect.ismethod(value) or inspect.isbuiltin(value):
        return value.__name__
    if getattr(kind, "__repr__", None) is object.__repr__:  # "<... at 0x...>": its class says it
        return f"<{kind.__name__}>"
    try:
        return _SHORT.repr(value)
    except Exception:
        return f"<{type(value).__name__}>"


def shown_args(bound: dict[str, Any]) -> dict[str, str]:
    """Bound arguments as a step shows them, without `self`/`cls`."""
    return {k: short(v) for k, v in bound.items() if k not in ("self", "cls")}


def first_line(exc: BaseException) -> str:
    """An exception's message as a step shows it: its first line, cut at 80 characters."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else ""
    return text if len(text) <= 80 else text[:79] + "\u2026"


@functools.lru_cache(maxsize=256)
def _parameters(fn: Callable[..., Any]) -> tuple[inspect.Signature | None, tuple[str, ...] | None]:
    """The signature, and the names plain positional calls bind to (None:
    the signature has *args, or none could be read)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None, None
    kinds = [p.kind for p in signature.parameters.values()]
    plain = inspect.Parameter.VAR_POSITIONAL not in kinds
    names = tuple(signature.parameters) if plain else None
    return signature, names


def bind(fn: Callable[..., Any], args: tuple[Any, ...], kw: dict[str, Any]) -> dict[str, Any]:
    """A call's arguments by parameter name (`argN` where the signature cannot say)."""
    signature, names = _parameters(fn)
    if names is not None and len(args) <= len(names) and not kw:  # the common call, fast
        return dict(zip(names, args, strict=False))
    if signature is not None:
        try:
            return dict(signature.bind(*args, **kw).arguments)
        except TypeError:
            pass
    return {**{f"arg{k}": v for k, v in enumerate(args)}, **kw}
