"""The policy a cluster's replicas enforce, for the commands that read that cluster: the admin's
ConfigMap (`dra-bridge/dra-bridge-policy`), the copy the replicas kept where that one is refused
(policy_store), or none (the bundled default is in force). Reads only."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

import orjson
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from .client import raw_get
from .policy_store import TEXT_KEY, LastGoodPolicy, policy_digest


@dataclass(frozen=True)
class ServedPolicy:
    text: str | None  # None: the bundled default is in force there
    source: str  # what the commands say they judged with
    refused: str | None = None  # the ConfigMap's text, where it is refused (parse error said by the caller)


def read_served_policy(api: ApiClient, namespace: str, name: str, timeout_s: float = 30.0,
                       refuses=None) -> ServedPolicy:
    """refuses(text) -> None or why the replicas refuse it (the parser's message). ApiException /
    OSError when the ConfigMap cannot be read (a 404 is an answer: none written)."""
    try:
        found = orjson.loads(raw_get(api, f"/api/v1/namespaces/{quote(namespace)}/configmaps/{quote(name)}",
                                     timeout=timeout_s).data)
    except ApiException as exc:
        if exc.status != 404:
            raise
        return ServedPolicy(None, f"the bundled default (no ConfigMap {namespace}/{name} in the cluster)")
    text = (found.get("data") or {}).get(TEXT_KEY)
    if text is None:
        return ServedPolicy(None, f"the bundled default (ConfigMap {namespace}/{name} holds no {TEXT_KEY})")
    why = refuses(text) if refuses else None
    if why is None:
        return ServedPolicy(text, f"ConfigMap {namespace}/{name}, policy {policy_digest(text)}")
    kept = LastGoodPolicy(api, namespace, name, timeout_s=timeout_s).read()
    if kept is None:
        return ServedPolicy(None, f"the bundled default (ConfigMap {namespace}/{name} is refused: {why}; "
                                  "no last good copy kept)", refused=why)
    return ServedPolicy(kept.text, f"the replicas' last good copy {kept.where}, policy {kept.digest} (ConfigMap "
                                   f"{namespace}/{name} is refused: {why})", refused=why)
