"""One rollout at a time: `rollout run` and `undo` hold a coordination.k8s.io Lease for as long as
they act, renewed while they do. A second command finds it held and refuses, naming the holder;
a holder that died leaves a lease that expires, which `--force-takeover` then takes. Pure: the
decision; app.kube.RolloutLease reads and writes the Lease."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

NAME = "dra-bridge-rollout"
DURATION_S = 60  # a holder renews every third of it


@dataclass(frozen=True)
class Held:
    holder: str
    renewed: datetime.datetime | None
    duration_s: int

    def expired(self, now: datetime.datetime) -> bool:
        return self.renewed is None or now - self.renewed > datetime.timedelta(seconds=self.duration_s)


def held_by(lease: dict | None) -> Held | None:
    """Who holds a Lease object (None: nobody: no lease, or released)."""
    spec = (lease or {}).get("spec") or {}
    holder = spec.get("holderIdentity")
    if not holder:
        return None
    renewed = None
    text = spec.get("renewTime") or spec.get("acquireTime")
    if isinstance(text, str):
        try:
            renewed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            renewed = None  # unreadable: as good as expired, but only taken by force
    return Held(str(holder), renewed, int(spec.get("leaseDurationSeconds") or DURATION_S))


def refusal(current: Held | None, me: str, now: datetime.datetime, force: bool, dead: bool = False) -> str | None:
    """Why `me` may not take the lease now (None: it may). dead: the holder is known to be gone (a
    command of this machine that was killed: its own rerun continues at once)."""
    if current is None or current.holder == me or dead:
        return None
    since = f", last renewed {current.renewed:%Y-%m-%d %H:%M:%S}Z" if current.renewed else ""
    if not current.expired(now):
        return (f"another rollout holds Lease {NAME}: {current.holder}{since}; wait for it to finish (one "
                "rollout at a time)")
    if not force:
        return (f"Lease {NAME} was held by {current.holder}{since} and has expired (that command died or lost "
                "the cluster): check nothing runs as it, then take it with --force-takeover")
    return None


def spec_for(me: str, now: datetime.datetime, duration_s: int = DURATION_S) -> dict:
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"holderIdentity": me, "leaseDurationSeconds": duration_s, "acquireTime": stamp, "renewTime": stamp}


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


class Holding:
    """The lease as one command holds it, over a store (read() -> the Lease or None; write(current,
    spec) -> False when someone wrote it first): take, renew, release."""

    def __init__(self, store, me: str, force: bool = False, clock=utc_now, duration_s: int = DURATION_S,
                 dead=lambda holder: False):
        """dead(holder) -> whether that holder is known to be gone (the shell checks its own machine)."""
        self.store, self.me, self.force, self.clock, self.duration_s = store, me, force, clock, duration_s
        self.dead = dead
        self.lost: str | None = None  # why it is no longer ours (then the command stops)

    def take(self) -> str | None:
        """None once it is ours; else why not (the command refuses, naming the holder)."""
        current = self.store.read()
        holder = held_by(current)
        why = refusal(holder, self.me, self.clock(), self.force, holder is not None and self.dead(holder.holder))
        if why is not None:
            return why
        if not self.store.write(current, spec_for(self.me, self.clock(), self.duration_s)):
            return f"another rollout took Lease {NAME} at the same moment: {held_by(self.store.read()) or '?'}"
        return None

    def renew(self) -> bool:
        """Renew while it is ours; False (and `lost` says why) once someone else holds it."""
        for _attempt in range(3):  # written between our read and write: read it again
            current = self.store.read()
            holder = held_by(current)
            if holder is None or holder.holder != self.me:
                self.lost = f"Lease {NAME} is held by {holder.holder if holder else 'nobody'} now, not by this command"
                return False
            spec = {**(current.get("spec") or {}), "renewTime": spec_for(self.me, self.clock())["renewTime"]}
            if self.store.write(current, spec):
                return True
        return True  # contended, still ours: the next round renews

    def release(self) -> None:
        current = self.store.read()
        holder = held_by(current)
        if holder is not None and holder.holder == self.me:
            self.store.write(current, {**(current.get("spec") or {}), "holderIdentity": None})
