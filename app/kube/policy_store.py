"""The last policy a replica accepted, kept in a ConfigMap beside the admin's (`<name>-last-good`),
so a replica that restarts while a refused file is mounted starts on it instead of crashing.
Stored with its digest; a copy whose text does not match its digest is never used."""

from __future__ import annotations

import hashlib
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import quote

import orjson
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from app.common import vocabulary

from .client import api_message, raw_get, raw_send, within

log = logging.getLogger("dra_bridge.policy")
TEXT_KEY, DIGEST_KEY = "policy.yaml", "digest"
BUNDLED_MARK = "bundled"  # data key present: the bundled default was in force (no admin file)


def policy_digest(text: str) -> str:
    """The digest every replica shows for a policy text (first 16 hex of its SHA-256)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class KeptPolicy:
    text: str | None  # None: the bundled default was in force
    digest: str
    where: str  # namespace/name of the ConfigMap it came from


class LastGoodPolicy:
    def __init__(self, api: ApiClient, namespace: str, policy_configmap: str, timeout_s: float = 5.0):
        self.api, self.namespace, self.timeout_s = api, namespace, timeout_s
        self.name = f"{policy_configmap}-last-good"
        self.where = f"{namespace}/{self.name}"
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="policy-store")
        self.stored: str | None = None  # the digest this replica last saw stored
        self.failures = 0

    @property
    def _path(self) -> str:
        return f"/api/v1/namespaces/{quote(self.namespace)}/configmaps/{quote(self.name)}"

    def read(self) -> KeptPolicy | None:
        """The kept policy; None when none was ever kept or its copy does not match its digest.
        ApiException / OSError / TimeoutError when it cannot be read."""
        try:
            found = orjson.loads(within(self.timeout_s, lambda: raw_get(self.api, self._path, timeout=self.timeout_s)
                                        .data))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        data = found.get("data") or {}
        text = None if BUNDLED_MARK in data else data.get(TEXT_KEY)
        digest = data.get(DIGEST_KEY)
        if text is None and BUNDLED_MARK not in data:
            log.error("%s holds no %s: not used", self.where, TEXT_KEY)
            return None
        if text is not None and policy_digest(text) != digest:
            log.error("%s: its policy's digest is %s, not the %s it says: not used", self.where,
                      policy_digest(text), digest)
            return None
        self.stored = digest
        return KeptPolicy(text, digest, self.where)

    def keep(self, text: str | None, digest: str) -> None:
        """Keep this policy (None: the bundled default), off the caller's thread; only when it differs."""
        if digest != self.stored:
            self._pool.submit(self._write, text, digest)

    def _write(self, text: str | None, digest: str) -> None:
        data = {DIGEST_KEY: digest, **({BUNDLED_MARK: "true"} if text is None else {TEXT_KEY: text})}
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "labels": dict(vocabulary.MANAGED_BY)},
                "data": data}
        try:
            try:
                current = orjson.loads(raw_get(self.api, self._path, timeout=self.timeout_s).data)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                raw_send(self.api, "POST", f"/api/v1/namespaces/{quote(self.namespace)}/configmaps", body,
                         timeout=self.timeout_s)
            else:
                body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                raw_send(self.api, "PUT", self._path, body, timeout=self.timeout_s)
            self.stored = digest
            log.info("policy %s kept in ConfigMap %s (a restart with a refused file starts on it)", digest, self.where)
        except Exception as exc:  # noqa: BLE001 - said, counted; the next accepted policy tries again
            self.failures += 1
            why = api_message(exc) if hasattr(exc, "status") else f"{type(exc).__name__}: {exc}"
            log.warning("policy %s not kept in ConfigMap %s: %s (a restart with a refused file would start on "
                        "what is kept there now)", digest, self.where, why)
