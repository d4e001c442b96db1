"""The readers' lock, held with a bound (issue 19).

Readers add one to an object's count under a lock shared by all of them (a
`multiprocessing.Lock` in the seed's API, passed in the handle). A reader
process killed inside that critical section never releases it: the seed's
other readers then block for good in `get`. A POSIX semaphore cannot tell
that its holder died, so refimpl waits a bounded time instead and raises
`ReaderLockTimeout` (a `TimeoutError`) saying so. The read is not counted,
which pins its object (the writer will eventually raise MemoryError on put,
which vLLM answers by sending items inline); recovery means restarting the
readers with a new lock, as vLLM does when a worker dies.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

# Seconds; the critical section takes microseconds, so only a dead (or
# stopped) holder makes a reader wait this long.
READER_LOCK_TIMEOUT = 10.0


class ReaderLockTimeout(TimeoutError):
    """The reader lock was not free within the bound: its holder probably died."""


class hold:
    """Acquire `lock` within `timeout` seconds (None: wait for ever, as the seed)."""

    __slots__ = ("lock", "timeout")

    def __init__(self, lock: Any, timeout: float | None) -> None:
        self.lock = lock
        self.timeout = timeout

    def __enter__(self) -> None:
        if self.timeout is None:
            self.lock.acquire()
        elif not self.lock.acquire(True, self.timeout):
            raise ReaderLockTimeout(
                f"the reader lock was not free within {self.timeout:g} s: a reader "
                "process probably died while holding it. This read is not counted; "
                "restart the readers with a new lock."
            )

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.lock.release()
