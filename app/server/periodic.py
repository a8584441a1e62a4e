"""A background round every `interval_s` on a thread of its own; a failed round is counted by
the subclass, logged, and the next one runs anyway."""

from __future__ import annotations

import logging
import threading


class Periodic:
    name = "periodic"
    first_round_at_once = False  # else the first round waits interval_s

    def __init__(self, interval_s: float = 120.0):
        self.interval_s = interval_s
        self._stop = threading.Event()

    def run_once(self):
        raise NotImplementedError

    def failed(self) -> None:
        """A round raised (a bug): count it where the subclass keeps count."""

    def _round(self) -> None:
        try:
            self.run_once()
        except Exception:  # noqa: BLE001 - one bad round must not stop the rounds for good
            self.failed()
            logging.getLogger(f"dra_bridge.{self.name}").exception("%s round failed", self.name)

    def _loop(self) -> None:
        if self.first_round_at_once:
            self._round()
        while not self._stop.wait(self.interval_s):
            self._round()

    def start(self):
        threading.Thread(target=self._loop, name=self.name, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
