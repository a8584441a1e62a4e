"""Loops that retry an API: growing waits, and log lines that stay readable during an outage."""

from __future__ import annotations

import logging
import time


class Backoff:
    """Waits that double from `initial_s` up to `max_s`; `reset()` after a success."""

    def __init__(self, initial_s: float, max_s: float = 30.0):
        self.initial_s, self.max_s = initial_s, max(max_s, initial_s)
        self._next = initial_s

    def next(self) -> float:
        wait, self._next = self._next, min(self._next * 2, self.max_s)
        return wait

    def reset(self) -> None:
        self._next = self.initial_s


class Throttled:
    """One retrying loop's failures in the log: the first at once, then at most one line per
    `every_s` counting those left out, and one line when it works again."""

    def __init__(self, logger: logging.Logger, every_s: float = 60.0, clock=time.monotonic):
        self.logger, self.every_s, self.clock = logger, every_s, clock
        self.failing = False
        self.suppressed = 0
        self._last = float("-inf")

    def failed(self, message: str, *args) -> bool:
        """Logs at warning unless one was logged within `every_s`; True when it logged."""
        now = self.clock()
        self.failing = True
        if now - self._last < self.every_s:
            self.suppressed += 1
            return False
        more = f" ({self.suppressed} more failure(s) since the last line)" if self.suppressed else ""
        self.logger.warning(message + more, *args)
        self._last, self.suppressed = now, 0
        return True

    def recovered(self, message: str, *args) -> None:
        if self.failing:
            self.logger.info(message, *args)
        self.failing, self.suppressed, self._last = False, 0, float("-inf")
