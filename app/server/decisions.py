"""Whole /mutate decisions of pod shapes already seen, kept across claim allocations.

A decision is a pure function of the pod's shape, the policy, the cluster facts that do not
move when a claim is allocated (every field of Facts but the verdicts: served classes, shareable
devices, plugin nodes, quotas, extended resources, Kueue, preemption, the release) and the DRA
verdict of each generated template. The policy and those facts are compared by identity (the
service carries them over unchanged from one allocation to the next); the verdicts a decision read
are recorded with it and judged again on the index in force, so an allocation that turns "serves"
into "busy" is a miss, and one that changes nothing the decision read is a hit.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, fields, replace

from app.application import Decision
from app.migration import Facts
from app.policy import Policy

# A template's verdicts are judged again on the event loop unless they cost more CPU there than
# this on average (a moving average: one collection pause is not the verdict's cost); dearer ones
# (large searches) go to a worker, which is what a miss does, and are tried on the loop again
# after DEAR_FOR_S. CPU time, not wall time: a loaded machine's GIL waits say nothing of the
# verdict. A worker's cost says little either: a first verdict also compiles its selectors.
CHEAP_VERDICT_S = 0.001
DEAR_FOR_S = 60.0
_WEIGHT = 0.2  # of the newest cost in the moving average


@dataclass(frozen=True)
class Judged:
    """One verdict a decision read: the template, whether the pod tolerates cordoned nodes, and
    what the judge answered (the reason only where a decision can print it)."""
    template: dict
    tolerates_cordon: bool
    answer: tuple[str, str]


def _seen(answer: tuple[str, str]) -> tuple[str, str]:
    # A serving template's reason (which node would hold it) never reaches the answer.
    return (answer[0], "") if answer[0] == "serves" else answer


def recording(facts: Facts) -> tuple[Facts, list[Judged]]:
    """facts whose judge notes each verdict it gives, and the list it notes into."""
    noted: list[Judged] = []
    if facts.dra is None:
        return facts, noted
    judge = facts.dra

    def dra(template: dict, tolerates_cordon: bool = False) -> tuple[str, str]:
        answer = judge(template, tolerates_cordon)
        noted.append(Judged(template, tolerates_cordon, _seen(answer)))
        return answer
    return replace(facts, dra=dra), noted


def _basis(facts: Facts) -> tuple:
    """What a decision read besides verdicts, by identity: every field of the facts (a field added
    to Facts is part of it without an edit here), the judge only as present or not."""
    return tuple(facts.dra is None if f.name == "dra" else getattr(facts, f.name) for f in fields(facts))


class Decisions:
    """Bounded LRU of decisions under one policy and one basis of facts; a new policy or basis
    empties it. Only for policies whose settings depend on the namespace's name, not its labels."""

    def __init__(self, size: int = 4096):
        self.size = size
        self._items: OrderedDict[tuple, tuple] = OrderedDict()
        self._under: tuple = (None, ())
        self._cost: dict[str, tuple[float, float]] = {}  # template -> (average CPU s, when last judged here)
        self._lock = threading.Lock()
        self.rejudged = 0  # verdicts judged again on a newer index (a test and a bench read it)

    def _current(self, policy: Policy, facts: Facts) -> bool:
        under_policy, under_basis = self._under
        basis = _basis(facts)
        return under_policy is policy and len(basis) == len(under_basis) and \
            all(a is b for a, b in zip(basis, under_basis))

    def get(self, key: tuple, policy: Policy, facts: Facts) -> tuple[Decision | None, str]:
        """(the decision, "reused") if one was made for this shape under this policy and basis
        and every verdict it read is still what the judge says (judged again only where cheap);
        else (None, why not: basis | unseen | dear | verdict)."""
        with self._lock:
            if not self._current(policy, facts):
                return None, "basis"
            found = self._items.get(key)
            if found is None:
                return None, "unseen"
            self._items.move_to_end(key)
            decision, judged = found
            if any(self._dear(j.template["metadata"]["name"]) for j in judged):
                return None, "dear"
        for j in judged:  # outside the lock: a verdict on a new index is computed here
            started = time.thread_time()
            answer = _seen(facts.dra(j.template, j.tolerates_cordon))
            self._note_cost(j.template["metadata"]["name"], time.thread_time() - started)
            self.rejudged += 1
            if answer != j.answer:
                return None, "verdict"
        return decision, "reused"

    def put(self, key: tuple, policy: Policy, facts: Facts, decision: Decision, noted: list[Judged]) -> None:
        with self._lock:
            if not self._current(policy, facts):
                self._items.clear()
                self._under = (policy, _basis(facts))
            self._items[key] = (decision, tuple(noted))
            if len(self._items) > self.size:
                self._items.popitem(last=False)

    def _dear(self, name: str) -> bool:
        average, when = self._cost.get(name, (0.0, 0.0))
        return average > CHEAP_VERDICT_S and time.monotonic() - when < DEAR_FOR_S

    def _note_cost(self, name: str, seconds: float) -> None:
        with self._lock:
            if len(self._cost) >= self.size and name not in self._cost:
                self._cost.clear()
            average = self._cost.get(name, (seconds, 0.0))[0]
            self._cost[name] = ((1 - _WEIGHT) * average + _WEIGHT * seconds, time.monotonic())
