"""What a move to DRA takes from a pod on every release from 1.34 to 1.38: preemption. The
scheduler does not preempt for DRA devices (no release up to 1.38.0-beta.0 has a DRAPreemption
gate; KEP-5690 is not in it), so a GPU pod that
preempts lower-priority GPU pods would wait Pending on DRA instead, and one that others preempt
could no longer be evicted for them. Pure: PriorityClasses and pods' priorities in, a reason out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.common import view_of
from app.policy import MigrationRules

from .legacy import legacy_resources, uses_dra

NEVER = "Never"
PREEMPTS, PREEMPTED = "it preempts", "it is preempted"  # how a reason starts: rollout groups by them


@dataclass(frozen=True)
class Priority:
    value: int
    preempts: bool  # preemptionPolicy PreemptLowerPriority (the default)
    name: str = ""  # its PriorityClass ("" for none)


@dataclass(frozen=True)
class Preemption:
    """classes: PriorityClass name -> Priority; default: what a pod naming no class gets (the
    globalDefault class, else 0); gpu_pods: the priorities GPU pods run at (None: pods not known:
    every PriorityClass but the system- ones stands for them)."""

    classes: Mapping[str, Priority]
    default: Priority = Priority(0, True)
    gpu_pods: tuple[Priority, ...] | None = None

    def of(self, spec: dict) -> Priority:
        """The pod's priority as the Priority admission plugin resolves it."""
        name = spec.get("priorityClassName")
        found = self.classes.get(name) if isinstance(name, str) else None
        base = found or (Priority(spec["priority"], True, "") if isinstance(spec.get("priority"), int)
                         else self.default)
        policy = spec.get("preemptionPolicy")
        return Priority(base.value, base.preempts if policy is None else policy != NEVER, base.name)

    def lost(self, spec: dict) -> str | None:
        """What a pod asking for GPUs loses on DRA while the scheduler does not preempt for DRA
        devices; None when nothing (no GPU pod below it that it preempts, none above that preempts it)."""
        me = self.of(spec)
        others = self.gpu_pods if self.gpu_pods is not None else \
            tuple(p for n, p in self.classes.items() if not n.startswith("system-")) + (self.default,)
        whose = "GPU pods" if self.gpu_pods is not None else "pods of PriorityClasses"
        shown = f" ({me.name})" if me.name else ""
        below = [p.value for p in others if p.value < me.value]
        if me.preempts and below:
            return (f"{PREEMPTS}: priority {me.value}{shown} above {whose} at {min(below)}; on DRA it would "
                    "wait Pending for their devices instead")
        above = [p for p in others if p.value > me.value and p.preempts]
        if above:
            top = max(above, key=lambda p: p.value)
            return (f"{PREEMPTED}: {whose} at priority {top.value}{f' ({top.name})' if top.name else ''} "
                    f"preempt it (priority {me.value}); on DRA they could not")
        return None


def gpu_pod_priorities(pods: Iterable[dict], rules: MigrationRules) -> tuple[dict, ...]:
    """What preemption reads of the pods that hold GPUs (claims, or legacy GPU requests under
    these rules), one entry per distinct priority: the fields the Priority admission plugin set."""
    seen = {(s.get("priority"), s.get("preemptionPolicy"), s.get("priorityClassName"))
            for s in (p.get("spec") for p in pods)
            if isinstance(s, dict) and (uses_dra(s) or legacy_resources(s, rules))}
    return tuple({k: v for k, v in zip(("priority", "preemptionPolicy", "priorityClassName"), entry) if v is not None}
                 for entry in sorted(seen, key=repr))


def preemption_of(priority_classes: Iterable[dict], gpu_pod_specs: Iterable[dict] | None = None) -> Preemption:
    """From PriorityClass objects and, where known, the specs of the pods that hold GPUs."""
    classes: dict[str, Priority] = {}
    default = Priority(0, True)
    for obj in priority_classes:
        name, value = view_of(obj).name, obj.get("value")
        if not isinstance(name, str) or not isinstance(value, int):
            continue
        classes[name] = Priority(value, obj.get("preemptionPolicy") != NEVER, name)
        if obj.get("globalDefault") is True:
            default = classes[name]
    preemption = Preemption(classes, default)
    if gpu_pod_specs is None:
        return preemption
    return Preemption(classes, default, tuple(preemption.of(s) for s in gpu_pod_specs))
