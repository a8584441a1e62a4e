"""Retrying loops: waits that grow, and a log that stays readable while an API is down."""

import logging

from app.common import Backoff, Throttled


def test_backoff_doubles_to_its_cap_and_resets():
    b = Backoff(1.0, 8.0)
    assert [b.next() for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    b.reset()
    assert b.next() == 1.0


def test_an_outage_logs_one_line_a_minute_and_says_how_many_it_left_out(caplog):
    now = [0.0]
    t = Throttled(logging.getLogger("t"), every_s=60, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="t"):
        for _ in range(240):  # four failures a second for a minute
            t.failed("watch failed (%s)", "ConnectionRefusedError")
            now[0] += 0.25
        t.failed("watch failed (%s)", "ConnectionRefusedError")
        t.recovered("watch works again")
        t.recovered("watch works again")  # said once
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["watch failed (ConnectionRefusedError)",
                     "watch failed (ConnectionRefusedError) (239 more failure(s) since the last line)",
                     "watch works again"]
