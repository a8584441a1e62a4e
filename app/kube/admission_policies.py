"""Keeps the API server's ValidatingAdmissionPolicies in step with the policy in force, so the
compilable part of each admin rule holds while dra-bridge is down. IO.

One replica at a time (the holder of a Lease): each round it lists ours (the managed-by label),
writes what is missing or was written as something else (server-side apply, forced: the policy
is the one source) and deletes what no rule compiles to any more. Which to write is decided by
the pure `changes` it is given.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import urllib3
from kubernetes.client.exceptions import ApiException

from app.common import Throttled, vocabulary

from .client import api_message, list_pages, raw_send

log = logging.getLogger("dra_bridge.admission_policies")
GROUP = "/apis/admissionregistration.k8s.io/v1"
PATHS = {"ValidatingAdmissionPolicy": f"{GROUP}/validatingadmissionpolicies",
         "ValidatingAdmissionPolicyBinding": f"{GROUP}/validatingadmissionpolicybindings"}
OURS = f"{vocabulary.MANAGED_BY_LABEL}={vocabulary.OURS}"


class AdmissionPolicySync:
    """`desired()` -> (policy digest, objects); `changes(desired, existing)` -> (write, delete)."""

    def __init__(self, api, lease, desired: Callable[[], tuple[str, list[dict]]], changes: Callable,
                 interval_s: float = 15.0, on_round: Callable[[bool], None] | None = None):
        self.api, self.lease, self.desired, self.changes = api, lease, desired, changes
        self.interval_s, self.on_round = interval_s, on_round
        self.leader = False
        self.synced_digest: str | None = None  # the policy whose compiled objects are all in place
        self.objects = 0
        self.last_error: str | None = None
        self._stop = threading.Event()

    def existing(self) -> list[dict]:
        found = []
        for kind, path in PATHS.items():
            # List items carry no kind: stamp it, `changes` keys on it.
            found += [{**item, "kind": kind} for item in list_pages(self.api, path, OURS)[0]]
        return found

    def run_once(self) -> tuple[list[str], list[str]] | None:
        """One round: (names written, names deleted); None when another replica holds the lease."""
        self.leader = self.lease.acquire()
        if not self.leader:
            return None
        digest, desired = self.desired()
        write, delete = self.changes(desired, self.existing())
        for obj in write:
            name = obj["metadata"]["name"]
            raw_send(self.api, "PATCH", f"{PATHS[obj['kind']]}/{name}", obj,
                     query=[("fieldManager", vocabulary.OURS), ("force", "true")],
                     content_type="application/apply-patch+yaml", timeout=10)
        for kind, name in delete:
            try:
                raw_send(self.api, "DELETE", f"{PATHS[kind]}/{name}", {}, timeout=10)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        self.synced_digest, self.objects, self.last_error = digest, len(desired), None
        if write or delete:
            log.info("compiled admission policies of policy %s in place: wrote %s; deleted %s", digest,
                     ", ".join(o["metadata"]["name"] for o in write) or "none",
                     ", ".join(name for _kind, name in delete) or "none")
        return [o["metadata"]["name"] for o in write], [name for _kind, name in delete]

    def status(self) -> dict:
        out = {"leader": self.leader, "syncedPolicy": self.synced_digest, "objects": self.objects}
        if self.last_error:
            out["error"] = self.last_error
        return out

    def _loop(self) -> None:
        failures = Throttled(log)
        while not self._stop.is_set():
            try:
                self.run_once()
                failures.recovered("compiled admission policies are written again")
                ok = True
            except ApiException as exc:
                self.last_error, ok = api_message(exc)[:500], False
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                self.last_error, ok = f"{type(exc).__name__}: {exc}"[:500], False
            if not ok:
                failures.failed("compiled admission policies not written (%s): the webhook still enforces every "
                                "rule, but nothing does while it is down; next round in %.0fs", self.last_error,
                                self.interval_s)
            if self.on_round:
                self.on_round(ok)
            self._stop.wait(self.interval_s)

    def start(self) -> "AdmissionPolicySync":
        threading.Thread(target=self._loop, daemon=True, name="admission-policies").start()
        return self

    def stop(self) -> None:
        self._stop.set()
