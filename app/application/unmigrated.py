"""Running pods that still hold device-plugin GPUs the webhook would rewrite now: admitted while
it was unreachable (failurePolicy: Ignore), or before it served them. `audit` lists them and
`serve` counts them per namespace (a metric the fail-open alert points at). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from app.common import view_of
from app.migration import OptIn, legacy_resources, recreated, running
from app.policy import Policy

from .decision import Outcome, decide_pod
from .facts import ClusterFacts


def unmigrated(pods: Iterable[dict], namespaces: dict[str, dict], policy: Policy, facts: ClusterFacts,
               opt_in: OptIn | None) -> Iterator[dict]:
    """The running pods with device-plugin asks the one decision would rewrite if created now, as
    `pods` are consumed. namespaces: name -> labels (a pod whose namespace is not there is
    skipped: not known)."""
    for pod in pods:
        namespace = view_of(pod).namespace
        spec = pod.get("spec")
        if namespace not in namespaces or not isinstance(spec, dict) or not running(pod) or \
                not legacy_resources(spec, policy.migration):
            continue
        found = decide_pod(recreated(pod), namespace, policy, facts, namespace_labels=namespaces[namespace],
                           opt_in=opt_in)
        if found.outcome is Outcome.REWRITE:
            yield pod


def per_namespace(pods: Iterable[dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pod in pods:
        namespace = view_of(pod).namespace
        counts[namespace] = counts.get(namespace, 0) + 1
    return counts
