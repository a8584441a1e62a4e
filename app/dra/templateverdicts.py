"""Verdicts of generated ResourceClaimTemplates on one index, remembered by name, and what they
say about the path a pod can take (serves, busy, shadow, cordoned, never). Pure."""

from __future__ import annotations

from .claims import parse_claim_spec
from .diagnosis import Verdict
from .feasibility import check
from .index import Index


GPU_PLUGIN_PREFIX = "nvidia.com/"  # the GPU device plugin's resources (whole GPUs, MIG, shares)


def plugin_advertising(index: Index) -> frozenset:
    """Nodes whose device plugin advertises GPUs (Node status.allocatable, not cordoned)."""
    return frozenset(node for node, resources in (index.node_resources or {}).items()
                     if any(str(r).startswith(GPU_PLUGIN_PREFIX) and n > 0 for r, n in resources.items()))


def publishes(index: Index, node: str) -> bool:
    """A DRA driver publishes devices of the node (our shadow slices do not count: nothing
    allocates them)."""
    return node not in index.shadow_nodes and any(p.local and p.devices for p in index.views.get(node, ()))


def served_twice(index: Index) -> frozenset:
    """Nodes a DRA driver publishes devices for while their device plugin still advertises GPUs:
    whatever their labels say, a device there could be handed out twice, so no pod is rewritten
    onto them."""
    return frozenset(node for node in plugin_advertising(index) if publishes(index, node))


class TemplateVerdicts:
    """Verdicts of generated ResourceClaimTemplates on one index, remembered by name (a hash of
    the spec), so a template the path choice judged is not judged again for its report."""

    def __init__(self, index: Index, path: str = "template.spec", size: int = 4096):
        self.index, self.path, self.size = index, path, size
        self._seen: dict[tuple, Verdict] = {}
        self.twice = served_twice(index)

    def __call__(self, template: dict, allocatable_only: bool = False, closed: frozenset = frozenset(),
                 twice_too: bool = False) -> Verdict:
        """allocatable_only: shadow nodes and nodes served twice do not count (`check`), unless
        twice_too; nor do the `closed` nodes (cordoned, leaving DRA). Each remembered apart."""
        key = (template["metadata"]["name"], allocatable_only, closed, twice_too)
        verdict = self._seen.get(key)
        if verdict is None:
            if len(self._seen) >= self.size:
                self._seen.clear()
            skip: frozenset = frozenset()
            if allocatable_only:
                skip = (frozenset() if twice_too else self.twice) | closed
            verdict = check(parse_claim_spec(template["spec"]["spec"], self.path), self.index,
                            allocatable_only=allocatable_only, skip=skip)
            self._seen[key] = verdict
        return verdict

    def dra(self, template: dict, tolerates_cordon: bool = False) -> tuple[str, str]:
        """Can DRA serve the template's claim with devices the scheduler can allocate? (state,
        why): serves; busy (they exist, all in use now); shadow (only on nodes our reporter
        shadows: nothing allocates there until NVIDIA's driver serves them); twice (only on nodes
        whose device plugin still advertises GPUs); cordoned (only on cordoned nodes, which take
        no pod that does not tolerate it: drained, or moving in a rollout); never (no device
        anywhere, or an invalid claim, e.g. a DeviceClass that does not exist). tolerates_cordon:
        the pod tolerates node.kubernetes.io/unschedulable."""
        verdict = self(template)
        if verdict.status in ("never", "invalid"):
            return "never", verdict.message
        # A node a rollout takes off DRA is closed even to pods that tolerate its cordon.
        closed = (frozenset() if tolerates_cordon else self.index.cordoned) | self.index.leaving
        allocatable = self(template, allocatable_only=True, closed=closed) \
            if self.index.shadow_nodes or closed or self.twice else verdict
        if allocatable.status == "never" and closed:
            reachable = self(template, allocatable_only=True)
            if reachable.status != "never":
                node = reachable.example_node if reachable.example_node in closed else min(closed)
                if node in self.index.leaving:
                    return "cordoned", (f"only nodes a rollout is taking back to the device plugin have such devices "
                                        f"(e.g. {node}): a claim there could not be unprepared once NVIDIA's plugin "
                                        "has gone")
                return "cordoned", (f"only cordoned nodes have such devices (e.g. {node}: drained, or moving in a "
                                    "rollout): it would be rewritten once such a node takes pods again")
        if allocatable.status == "never" and self.twice and \
                self(template, allocatable_only=True, closed=closed, twice_too=True).status != "never":
            node = verdict.example_node if verdict.example_node in self.twice else min(self.twice)
            return "twice", (f"only nodes whose device plugin still advertises GPUs have such devices (e.g. {node}: "
                             "a DRA driver publishes them too, so one GPU could be handed out twice; `rollout "
                             "status` names such nodes)")
        if allocatable.status == "never":
            node = verdict.example_node if verdict.example_node in self.index.shadow_nodes \
                else min(self.index.shadow_nodes)
            return "shadow", (f"only nodes no DRA driver serves yet have such devices ({verdict.nodes} shadowed by "
                              f"dra-bridge's reporter): it would be rewritten once NVIDIA's driver serves node {node}")
        if allocatable.status == "satisfiable":
            return "serves", allocatable.message
        return "busy", allocatable.message
