"""Who holds the rollout Lease, as another operator reads it (user, host, process), whether such
a holder's process is gone from this machine (a command killed here frees its lease), and the
renewal that keeps a held lease while a command acts."""

from __future__ import annotations

import getpass
import os
import re
import socket
import threading
from collections.abc import Callable

from app.common import BridgeError


def holder_identity() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()} pid {os.getpid()}"


def gone_from_this_host(holder: str) -> bool:
    """A holder of this machine whose process is gone; False for any other holder."""
    match = re.fullmatch(r".+@(?P<host>[^ ]+) pid (?P<pid>\d+)", holder)
    if not match or match["host"] != socket.gethostname():
        return False
    try:
        os.kill(int(match["pid"]), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # alive, someone else's
    return False


def renew_in_background(holding, warn: Callable[[str], None]) -> threading.Event:
    """Renew the lease every third of its duration until the event is set (holding None: a dry
    run holds nothing); a failed renewal is said and tried again next round."""
    done = threading.Event()
    if holding is None:
        return done

    def loop():
        while not done.wait(holding.duration_s / 3):
            try:
                if not holding.renew():
                    return
            except BridgeError as exc:  # the API hiccuped: the next round tries again
                warn(f"could not renew the rollout Lease: {exc}")
    threading.Thread(target=loop, name="lease", daemon=True).start()
    return done
