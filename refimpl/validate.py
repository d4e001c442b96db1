"""Argument checks that survive `python -O` (no bare asserts)."""

from typing import Any


def check_int(name: str, value: Any, low: int | None = None, high: int | None = None) -> int:
    """Return `value` if it is an int (not a bool) within [low, high], else raise ValueError."""
    if type(value) is bool or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, not {type(value).__name__}")
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}, got {value}")
    return int(value)
