"""The policy in force: loaded from its file (the admin's ConfigMap, mounted), reloaded when the
file changes, and what of it the API server enforces by itself (compiled admission policies)."""

from __future__ import annotations

import hashlib
import logging
import os
import time

from app.common import PolicyError
from app.policy import Policy, compile_policy, default_policy, parse_policy, read_policy_text

from .metrics import Metrics

log = logging.getLogger("dra_bridge.service")
BUNDLED = "(bundled default)"


class PolicyHolder:
    """The policy in force, and which: its digest is on /readyz and a metric, so each replica
    says what it enforces. A bad file on reload is refused (the last good policy stays), said by
    a log line, a metric, /readyz detail and an Event on the policy's ConfigMap.

    `optional`: the file is the admin's ConfigMap, mounted optional. While it is absent the
    bundled default is in force (said on /readyz and in the log), so an upgrade that ships no
    policy never replaces the admin's, and a fresh install runs before one is written."""

    def __init__(self, path: str | None, metrics: Metrics | None = None, events=None, optional: bool = False):
        self.path, self.metrics, self.events, self.optional = path, metrics, events, optional
        self.last_error: str | None = None
        self.vap_sync = None  # set by serve when it keeps compiled admission policies in step
        self.policy: Policy = self._load()  # bad initial file: raise
        self._stamp = self._current_stamp()
        self._show()

    def _absent(self) -> bool:
        return bool(self.optional and self.path and not os.path.exists(self.path))

    def _load(self) -> Policy:
        text = read_policy_text(self.path) if self.path and not self._absent() else None
        policy = parse_policy(text, self.path) if text is not None else default_policy()
        self.digest = hashlib.sha256((text or BUNDLED).encode()).hexdigest()[:16]
        self.source = self.path if text is not None else (f"{BUNDLED}: {self.path} absent" if self.path else BUNDLED)
        self.loaded_at = time.time()
        self.compiled, self.vap_objects = compile_policy(policy.rules)
        return policy

    def _current_stamp(self):
        if not self.path:
            return None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def check(self) -> bool:
        """Reload when the file changed; True when a new policy took effect."""
        stamp = self._current_stamp()
        if not self.path or stamp == self._stamp:
            return False
        self._stamp = stamp
        kept = self.digest
        try:
            self.policy = self._load()
        except PolicyError as exc:
            self.digest, self.last_error = kept, str(exc)
            if self.metrics:
                self.metrics.policy_reload_errors.inc()
                self.metrics.policy_rejected.set(1)
            log.error("policy reload rejected, keeping the last good policy (%s): %s", kept, exc)
            if self.events is not None:
                self.events.post("Warning", "PolicyRejected", f"policy not taken, still enforcing {kept}: {exc}")
            return False
        if self.last_error is not None and self.events is not None:
            self.events.post("Normal", "PolicyLoaded", f"policy {self.digest} in force again")
        self.last_error = None
        self._show()
        if stamp is None:
            log.warning("policy file %s is gone (its ConfigMap deleted?): the bundled default policy %s is in force",
                        self.path, self.digest)
        else:
            log.info("policy %s reloaded from %s", self.digest, self.path)
        return True

    def _show(self) -> None:
        if self.metrics:
            self.metrics.policy_info.clear()
            self.metrics.policy_info.labels(self.digest).set(self.loaded_at)
            self.metrics.policy_rejected.set(0)

    def status(self) -> dict:
        out = {"digest": self.digest, "source": self.source, "rules": len(self.policy.rules)}
        if self.last_error:
            out["rejected"] = self.last_error[:1000]
        # Where each rule is enforced: by the API server (compiled, holds while we are down) or here only.
        out["enforcement"] = {each.rule: {"apiServer": each.compiled,
                                          "webhookOnly": [f"{name}: {why}" for name, why in each.webhook_only]}
                              for each in self.compiled}
        if self.vap_sync is not None:
            out["compiledPolicies"] = self.vap_sync.status()
        return out
