"""A per-thread time limit that long CPU work checks cooperatively.

A review runs in a worker thread under `limit(seconds)`; loops that can grow with their
input call `check()`, which raises DeadlineExceeded once the time is spent. Threads cannot
be stopped from outside, so this is how one request's work is kept below the webhook timeout.
"""

from __future__ import annotations

import contextlib
import threading
import time


class DeadlineExceeded(Exception):
    """The work ran past its time limit; what it had not finished is unknown."""


_local = threading.local()


@contextlib.contextmanager
def limit(seconds: float | None):
    """Run the block under a deadline (None: no limit); nested limits keep the earlier one."""
    previous = getattr(_local, "until", None)
    until = None if seconds is None else time.monotonic() + seconds
    if previous is not None and (until is None or previous < until):
        until = previous
    _local.until = until
    try:
        yield
    finally:
        _local.until = previous


def check() -> None:
    until = getattr(_local, "until", None)
    if until is not None and time.monotonic() > until:
        raise DeadlineExceeded("the review ran out of time")

