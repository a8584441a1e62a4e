"""The policy in force: loaded from its file (the admin's ConfigMap, mounted), reloaded when the
file changes, and what of it the API server enforces by itself (compiled admission policies)."""

from __future__ import annotations

import logging
import os
import time

from app.common import PolicyError
from app.kube import policy_digest
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
    policy never replaces the admin's, and a fresh install runs before one is written.

    `last_good` (kube.LastGoodPolicy, in a cluster): each policy taken is kept there, and a file
    refused at start starts the replica on the kept one (the bundled default where none was
    ever kept), refused as a reload is; without it a bad initial file raises."""

    def __init__(self, path: str | None, metrics: Metrics | None = None, events=None, optional: bool = False,
                 last_good=None):
        self.path, self.metrics, self.events, self.optional = path, metrics, events, optional
        self.last_good = last_good
        self.last_error: str | None = None
        self._kept_unread = False  # started on the bundled default because the kept policy could not be read
        self.vap_sync = None  # set by serve when it keeps compiled admission policies in step
        try:
            self.policy: Policy = self._start_absent() if self._absent() and last_good is not None else self._load()
        except PolicyError as exc:
            if last_good is None:
                raise
            self.policy = self._start_on_kept(exc)
        self._stamp = self._current_stamp()
        self._show()

    def _absent(self) -> bool:
        return bool(self.optional and self.path and not os.path.exists(self.path))

    def _load(self) -> Policy:
        text = read_policy_text(self.path) if self.path and not self._absent() else None
        policy = parse_policy(text, self.path) if text is not None else default_policy()
        self._take(policy, policy_digest(text or BUNDLED),
                   self.path if text is not None else (f"{BUNDLED}: {self.path} absent" if self.path else BUNDLED))
        if self.last_good is not None:
            self.last_good.keep(text, self.digest)
        return policy

    def _start_absent(self) -> Policy:
        """No file at start: a fresh cluster (bundled default, quietly) or the admin's ConfigMap
        deleted since a policy was kept (that policy, loudly: its rules never drop silently)."""
        try:
            kept = self.last_good.read()
        except Exception:  # noqa: BLE001 - unknown: started as refused, the kept copy retried
            raise PolicyError(self._gone()) from None
        if kept is None or kept.text is None:
            return self._load()
        return self._start_on_kept(PolicyError(self._gone()), kept)

    def _gone(self) -> str:
        return (f"{self.path} is gone (the policy ConfigMap was deleted): its rules are kept; write the policy "
                f"again, or delete ConfigMap {self.last_good.where} too and restart the replicas for the bundled "
                "default")

    def _take(self, policy: Policy, digest: str, source: str) -> None:
        self.digest, self.source, self.loaded_at = digest, source, time.time()
        self.compiled, self.vap_objects = compile_policy(policy)

    def _start_on_kept(self, refused: PolicyError, kept=None) -> Policy:
        """The mounted file is refused at start: the kept policy (read here unless given), else the
        bundled default."""
        self.last_error = str(refused)
        policy, unread = None, None
        try:
            kept = kept or self.last_good.read()
        except Exception as exc:  # noqa: BLE001 - said below; retried at each reload check
            kept, unread = None, f"{type(exc).__name__}: {exc}"
        if kept is not None:
            try:
                policy = parse_policy(kept.text, kept.where) if kept.text is not None else default_policy()
                self._take(policy, kept.digest, f"last good policy kept in ConfigMap {kept.where} ({self.path} "
                                                "refused)")
            except PolicyError as exc:  # kept by an older release this one refuses
                policy, unread = None, f"it is refused too: {exc}"
        if policy is None:
            policy = default_policy()
            self._take(policy, policy_digest(BUNDLED), f"{BUNDLED}: {self.path} refused, no last good policy in "
                                                       f"ConfigMap {self.last_good.where}" + (f" ({unread})" if unread
                                                                                              else ""))
        self._kept_unread = unread is not None and "refused too" not in unread
        if self.metrics:
            self.metrics.policy_reload_errors.inc()
        log.error("policy %s refused at start, enforcing %s (%s): %s", self.path, self.digest, self.source, refused)
        if self.events is not None:
            self.events.post("Warning", "PolicyRejected", f"policy not taken at start, enforcing {self.digest} "
                                                          f"({self.source}): {refused}")
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
            return self._kept_unread and self._retry_kept()
        self._stamp = stamp
        kept = self.digest
        try:
            if stamp is None and self._absent() and self.last_good is not None and not self.source.startswith(BUNDLED):
                raise PolicyError(self._gone())  # deleted: what it said stays in force
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

    def _retry_kept(self) -> bool:
        """Started on the bundled default because the kept policy was unreadable: read it again."""
        try:
            kept = self.last_good.read()
        except Exception:  # noqa: BLE001 - still unreadable: the next check tries again
            return False
        self._kept_unread = False
        if kept is None or kept.digest == self.digest:
            return False
        refused = self.last_error
        self.policy = self._start_on_kept(PolicyError(refused or "refused at start"))
        self._show()
        return True

    def _show(self) -> None:
        if self.metrics:
            self.metrics.policy_info.clear()
            self.metrics.policy_info.labels(self.digest).set(self.loaded_at)
            self.metrics.policy_rejected.set(1 if self.last_error else 0)

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
