"""The requests of the claim a pod's asks become: one per running container (init containers
reuse idle devices first, as the device plugin hands them on), rendered into a
ResourceClaimTemplate named by its canonical spec; and the legacy resources taken off the pod. Pure."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import orjson

from app.common import vocabulary

from .family_asks import FamilyAsk, Unmigratable
from .sharing import SharePlan, opaque

MAX_REQUESTS = vocabulary.DRA_MAX_REQUESTS


MANAGED_BY = vocabulary.MANAGED_BY


TEMPLATE_PREFIX = "dra-bridge-"


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass
class ClaimRequest:
    name: str
    device_class: str
    count: int
    selectors: list
    share_key: tuple = ()
    share: SharePlan | None = None
    aligned: str | None = None  # attribute the devices should share (topology)
    require: bool = False

    @property
    def shape(self) -> tuple:
        return (self.device_class, tuple(self.selectors), self.share_key)

    def render(self) -> dict:
        exactly = _exactly(self.device_class, self.count, self.selectors)
        if self.share and self.share.variants:
            # Shares first, a whole device last: the allocator takes the first alternative that fits.
            alternatives = [{"name": name, **_exactly(self.device_class, self.count, self.selectors + extra),
                             **({"capacity": {"requests": capacity}} if capacity else {})}
                            for name, extra, capacity in self.share.variants]
            if self.share.whole:
                alternatives.append({"name": "whole", **exactly})
            if len(alternatives) == 1:
                alternatives[0].pop("name")
                return {"name": self.name, "exactly": alternatives[0]}
            return {"name": self.name, "firstAvailable": alternatives}
        if self.aligned and not self.require:
            # Aligned first, any devices second.
            return {"name": self.name, "firstAvailable": [{"name": "aligned", **exactly}, {"name": "any", **exactly}]}
        return {"name": self.name, "exactly": exactly}

    def constraint(self) -> dict | None:
        if not self.aligned:
            return None
        target = self.name if self.require else f"{self.name}/aligned"
        return {"requests": [target], "matchAttribute": self.aligned}

    def config(self, domain: str) -> dict | None:
        """NVIDIA's sharing config for the whole-device form of this request."""
        if not self.share or not self.share.config:
            return None
        target = f"{self.name}/whole" if self.share.variants else self.name
        return {"requests": [target], "opaque": opaque(domain, self.share.config)}


def _exactly(device_class: str, count: int, selectors: list[str]) -> dict:
    exactly = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": expr}} for expr in selectors]
    return exactly


def _request_name(container: str, taken: set[str]) -> str:
    base = container if _DNS_LABEL.match(container) else _dns_safe(container)
    name, n = base, 2
    while name in taken:
        suffix = f"-{n}"
        name = base[: 63 - len(suffix)].rstrip("-") + suffix
        n += 1
    taken.add(name)
    return name


def _dns_safe(text: str) -> str:
    cleaned = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:54].rstrip("-") or "c"
    return f"{cleaned}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def assign_requests(asks: list[FamilyAsk], notes: list[str]):
    """One request per running container; init containers reuse idle devices first.

    The device plugin hands an init container's devices on to the containers after it, so a
    pod never needs more than max(init, sum of app containers + sidecars) devices of a kind.
    """
    requests: list[ClaimRequest] = []
    refs: dict[tuple, list[str]] = {}
    taken: set[str] = set()
    by_container: dict[tuple, ClaimRequest] = {}
    for ask in asks:
        if ask.list_name == "containers" or ask.sidecar:
            req = ClaimRequest(_request_name(ask.container, taken), ask.device_class, ask.devices, ask.selectors,
                           ask.share.key(), ask.share_plan)
            requests.append(req)
            by_container[(ask.list_name, ask.index, ask.family)] = req
            refs.setdefault((ask.list_name, ask.index), []).append(req.name)
    spill: list[ClaimRequest] = []
    for ask in asks:
        if ask.list_name != "initContainers" or ask.sidecar:
            continue
        reusable = [r for key, r in by_container.items()
                    if r.shape == ask.shape and (key[0] == "containers" or key[1] > ask.index)]
        reusable += [r for r in spill if r.shape == ask.shape]
        chosen, have = [], 0
        for req in reusable:
            if have >= ask.devices:
                break
            chosen.append(req)
            have += req.count
        if have < ask.devices:
            if len(requests) >= MAX_REQUESTS:
                raise Unmigratable(f"more than {MAX_REQUESTS} device requests would be needed: the DRA limit "
                                    "per claim")
            own = ClaimRequest(_request_name(ask.container, taken), ask.device_class, ask.devices - have, ask.selectors,
                           ask.share.key(), ask.share_plan)
            requests.append(own)
            spill.append(own)
            chosen.append(own)
            have = ask.devices
        if have > ask.devices:
            notes.append(f"init container {ask.container} sees {have} devices (asked {ask.devices}): "
                         f"it shares {', '.join(r.name for r in chosen)} with the containers after it")
        refs.setdefault((ask.list_name, ask.index), []).extend(r.name for r in chosen)
    return requests, refs


def strip_legacy(container: dict, removed: dict) -> None:
    resources = container.get("resources") or {}
    for section in ("limits", "requests"):
        values = resources.get(section)
        if not isinstance(values, dict):
            continue
        for key in removed:
            values.pop(key, None)
        if not values:
            resources.pop(section)
    if "resources" in container and not resources:
        container.pop("resources")


def template_name(template_spec: dict) -> str:
    canonical = orjson.dumps(template_spec, option=orjson.OPT_SORT_KEYS)
    return TEMPLATE_PREFIX + hashlib.sha256(canonical).hexdigest()[:16]


def render_template(requests: list[dict], namespace: str | None, constraints: list[dict] | None = None,
                    config: list[dict] | None = None) -> dict:
    spec = {"spec": {"devices": {"requests": requests}}}
    if constraints:
        spec["spec"]["devices"]["constraints"] = constraints
    if config:
        spec["spec"]["devices"]["config"] = config
    metadata = {"name": template_name(spec), "labels": dict(MANAGED_BY)}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": metadata, "spec": spec}
