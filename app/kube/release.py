"""Which Kubernetes release the API server runs, and which DRA gates it really has on: its
/version, then a server-side dry run (nothing is stored) of an object holding a gated field,
for the gates an admin may have turned on or off (their defaults differ between 1.34 and 1.38).
A field the answer lacks means the gate is off there, whatever the release's defaults say."""

from __future__ import annotations

import json
import logging

import urllib3
from kubernetes.client.exceptions import ApiException

from app.common import ClusterUnreachable
from app.common import release as releases

from .client import raw_get, raw_send, why_failed

log = logging.getLogger("dra_bridge.kube")
PROBE_NAME = "dra-bridge-feature-probe"


def server_release(api, timeout_s: float = 10.0) -> releases.Release:
    """The release /version names (UnknownRelease for one older than 1.34). A server that does
    not answer raises what the client raised: callers name the server and context as for any read."""
    try:
        response = raw_get(api, "/version", timeout=timeout_s)
        try:
            info = json.loads(response.data or b"{}")
        finally:
            response.release_conn()
    except (ApiException, ValueError) as exc:
        raise ClusterUnreachable(f"reading the API server's /version: {why_failed(exc)}") from exc
    return releases.from_server(info)


# One dry-run create per probe: (gate, path, body). A DeviceClass needs no node or driver.
def _class_probe() -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": PROBE_NAME},
            "spec": {"extendedResourceName": "dra-bridge.io/feature-probe"}}


def _slice_probe() -> dict:
    device = {"name": "probe", "taints": [{"key": "dra-bridge.io/probe", "effect": "NoSchedule"}],
              "allowMultipleAllocations": True,
              "capacity": {"memory": {"value": "1Gi", "requestPolicy": {"default": "1Mi",
                                                                          "validRange": {"min": "1Mi"}}}}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": PROBE_NAME},
            "spec": {"driver": "probe.dra-bridge.io", "allNodes": True,
                     "pool": {"name": "probe", "generation": 1, "resourceSliceCount": 1}, "devices": [device]}}


PROBES = (("/apis/resource.k8s.io/v1/deviceclasses", _class_probe),
          ("/apis/resource.k8s.io/v1/resourceslices", _slice_probe))


def probed_release(api, release: releases.Release | None = None) -> tuple[releases.Release, list[str]]:
    """(the release with the gates the dry runs showed, what could not be probed and why). A
    probe the server refuses (403: no create right; 422) leaves those gates at the release's
    defaults, and is said."""
    release = release or server_release(api)
    changes: dict[str, bool] = {}
    unprobed = []
    for path, make in PROBES:
        sent = make()
        try:
            returned = raw_send(api, "POST", path, sent, query=[("dryRun", "All")])
        except (ApiException, OSError, ValueError, urllib3.exceptions.HTTPError) as exc:
            unprobed.append(f"{sent['kind']}: {why_failed(exc)}")  # a probe never stops the caller
            continue
        lost = {loss.gate for loss in releases.dropped(sent, returned)}
        for pattern, gate in releases.KEPT_BY[sent["kind"]]:
            if releases.holds(sent, pattern):
                changes[gate] = gate not in lost
    differs = {g: on for g, on in changes.items() if on != release.has(g)}
    if differs:
        said = ", ".join(f"{g}={'true' if on else 'false'}" for g, on in sorted(differs.items()))
        release = release.with_gates(differs, f"a dry run shows {said}")
        log.info("the API server's DRA gates differ from Kubernetes %s's defaults: %s", release.version, said)
    return release, unprobed
