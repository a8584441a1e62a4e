"""What Kubernetes 1.37's quota evaluators charge under `requests.R` in a namespace, from its pods
and claims: the yardstick for a ResourceQuota's `status.used` (a budget charging one GPU twice
shows more there). Pure.

As upstream's evaluators do (pkg/quota/v1/evaluator/core):
- a pod that is not finished is charged its requests of R: its containers and restartable init
  containers together, or its largest other init container where that is more;
- a claim is charged, under requests.R, the devices it asks of each DeviceClass declaring
  `extendedResourceName: R` (allocated or not; firstAvailable: the most any alternative asks;
  allocationMode All: 32);
- a KEP-5004 claim the scheduler made for a pod is charged that less what its pod is charged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from app.common import submap
from app.common import controller_ref, count_or_none, vocabulary, view_of

from .asks import pod_asks

EXTENDED_CLAIM_ANNOTATION = vocabulary.EXTENDED_CLAIM_ANNOTATION


def pod_charge(pod: dict, resource: str) -> int:
    """requests.<resource> the pod evaluator charges a pod (0 once it finished): its effective
    ask (asks.PodAsks.effective)."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    spec = submap(pod, "spec")
    return pod_asks(spec, lambda name: name == resource).effective(resource)


def _devices(request: dict) -> int:
    mode = request.get("allocationMode") or "ExactCount"
    if mode == "All":
        return vocabulary.DRA_MAX_DEVICES_PER_CLAIM
    if mode != "ExactCount":
        return 0  # upstream charges nothing for a mode it does not know
    return count_or_none(request.get("count", 1)) or 0


def claim_asks(claim: dict) -> dict[str, int]:
    """DeviceClass -> devices the claim evaluator charges a claim (its spec, worst case)."""
    out: dict[str, int] = {}
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        if not isinstance(request, dict):
            continue
        if request.get("firstAvailable"):
            most: dict[str, int] = {}
            for sub in request["firstAvailable"]:
                if isinstance(sub, dict) and sub.get("deviceClassName"):
                    cls = str(sub["deviceClassName"])
                    most[cls] = max(most.get(cls, 0), _devices(sub))
            for cls, devices in most.items():
                out[cls] = out.get(cls, 0) + devices
        elif isinstance(request.get("exactly"), dict) and request["exactly"].get("deviceClassName"):
            cls = str(request["exactly"]["deviceClassName"])
            out[cls] = out.get(cls, 0) + _devices(request["exactly"])
    return out


def _owner_pod(claim: dict, pods: Mapping[tuple[str, str], dict]) -> dict | None:
    """The pod a KEP-5004 claim was made for, where upstream would take its usage off the claim."""
    if view_of(claim).annotations.get(EXTENDED_CLAIM_ANNOTATION) != "true":
        return None
    owner = controller_ref(claim) or {}
    if owner.get("kind") != "Pod" or owner.get("apiVersion") != "v1":
        return None
    pod = pods.get((view_of(claim).namespace, str(owner.get("name"))))
    if pod is None or (owner.get("uid") and view_of(pod).uid != owner.get("uid")):
        return None
    named = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    return pod if named in (None, view_of(claim).name) else None


def charged(pods: Iterable[dict], claims: Iterable[dict], resource: str,
            extended: Mapping[str, str]) -> dict[str, int]:
    """namespace -> what the quota evaluators charge under requests.<resource> there.
    extended: DeviceClass -> its extendedResourceName."""
    out: dict[str, int] = {}
    by_name: dict[tuple[str, str], dict] = {}
    for pod in pods:
        namespace = view_of(pod).namespace
        by_name[(namespace, view_of(pod).name)] = pod
        out[namespace] = out.get(namespace, 0) + pod_charge(pod, resource)
    for claim in claims:
        devices = sum(n for cls, n in claim_asks(claim).items() if extended.get(cls) == resource)
        owner = _owner_pod(claim, by_name)
        if owner is not None:
            devices = max(0, devices - pod_charge(owner, resource))
        if devices:
            namespace = view_of(claim).namespace
            out[namespace] = out.get(namespace, 0) + devices
    return {namespace: total for namespace, total in out.items() if total}
