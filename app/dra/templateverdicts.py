"""Verdicts of generated ResourceClaimTemplates on one index, remembered by name, and what they
say about the path a pod can take (serves, busy, shadow, cordoned, never). Pure."""

from __future__ import annotations

from .claims import parse_claim_spec
from .diagnosis import Verdict
from .feasibility import check
from .index import Index


class TemplateVerdicts:
    """Verdicts of generated ResourceClaimTemplates on one index, remembered by name (a hash of
    the spec), so a template the path choice judged is not judged again for its report."""

    def __init__(self, index: Index, path: str = "template.spec", size: int = 4096):
        self.index, self.path, self.size = index, path, size
        self._seen: dict[str, Verdict] = {}
        self._allocatable: dict[str, Verdict] = {}
        self._open: dict[str, Verdict] = {}

    def __call__(self, template: dict, allocatable_only: bool = False, open_only: bool = False) -> Verdict:
        """allocatable_only: shadow nodes do not count (`check`); open_only: cordoned nodes do not
        count either. Each remembered apart."""
        seen = (self._open if open_only else self._allocatable) if allocatable_only else self._seen
        name = template["metadata"]["name"]
        verdict = seen.get(name)
        if verdict is None:
            if len(seen) >= self.size:
                seen.clear()
            verdict = check(parse_claim_spec(template["spec"]["spec"], self.path), self.index,
                            allocatable_only=allocatable_only, skip=self.index.cordoned if open_only else frozenset())
            seen[name] = verdict
        return verdict

    def dra(self, template: dict, tolerates_cordon: bool = False) -> tuple[str, str]:
        """Can DRA serve the template's claim with devices the scheduler can allocate? (state,
        why): serves; busy (they exist, all in use now); shadow (only on nodes our reporter
        shadows: nothing allocates there until NVIDIA's driver serves them); cordoned (only on
        cordoned nodes, which take no pod that does not tolerate it: drained, or moving in a
        rollout); never (no device anywhere, or an invalid claim, e.g. a DeviceClass that does
        not exist). tolerates_cordon: the pod tolerates node.kubernetes.io/unschedulable."""
        verdict = self(template)
        if verdict.status in ("never", "invalid"):
            return "never", verdict.message
        closed = bool(self.index.cordoned) and not tolerates_cordon
        allocatable = self(template, allocatable_only=True, open_only=closed) if self.index.shadow_nodes or closed \
            else verdict
        if allocatable.status == "never" and closed:
            reachable = self(template, allocatable_only=True)
            if reachable.status != "never":
                node = reachable.example_node if reachable.example_node in self.index.cordoned \
                    else min(self.index.cordoned)
                return "cordoned", (f"only cordoned nodes have such devices (e.g. {node}: drained, or moving in a "
                                    "rollout): it would be rewritten once such a node takes pods again")
        if allocatable.status == "never":
            node = verdict.example_node if verdict.example_node in self.index.shadow_nodes \
                else min(self.index.shadow_nodes)
            return "shadow", (f"only nodes no DRA driver serves yet have such devices ({verdict.nodes} shadowed by "
                              f"dra-bridge's reporter): it would be rewritten once NVIDIA's driver serves node {node}")
        if allocatable.status == "satisfiable":
            return "serves", allocatable.message
        return "busy", allocatable.message
