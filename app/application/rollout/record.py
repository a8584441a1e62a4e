"""The record of one node's move, kept on the node, so a run or undo stopped at any step (a
budget, a timeout, kill -9) is continued from there by the same command. Pure.

Annotations: WAVE (the wave's number), STEP (the last step finished, a name of Step) and BEFORE
(JSON: the version of this record, what the node was, and the workloads its evictions took pods
from, with how many pods each had bound before: what must be bound again before the move is done).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import IntEnum

from app.common import InputError, view_of

from .sides import BEFORE, STEP, WAVE, NodeBefore

VERSION = 1


class Step(IntEnum):
    """A move's steps in the order they finish; UNDO_* are taking it back."""

    START = 0
    CORDONED = 1  # cordoned, the record written
    EVICTED = 2  # its GPU pods evicted (DaemonSet pods that tolerate the cordon aside) and gone
    FLIPPED = 3  # switch labels: device plugin off, NVIDIA's kubelet plugin on
    PUBLISHED = 4  # NVIDIA's driver publishes what the device plugin advertised
    MOVED = 5  # DaemonSet GPU pods back on DRA, uncordoned; its workloads' pods not all bound yet
    DONE = 6  # every workload it evicted has its pods bound again
    UNDOING = 10  # cordoned to go back
    UNDO_EVICTED = 11
    UNDO_RESTORED = 12  # switch labels as they were
    UNDO_READY = 13  # the device plugin advertises again, cordon as it was; workloads not all back yet

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", "-")

    @classmethod
    def parse(cls, text: str | None) -> Step:
        if not text:
            return cls.START
        for step in cls:
            if step.label == text:
                return step
        raise InputError(f"annotation {STEP}", f"unknown rollout step {text!r} (known: "
                                               f"{', '.join(s.label for s in cls)})")

    @property
    def undoing(self) -> bool:
        return self >= Step.UNDOING

    @classmethod
    def undo_label(cls, text: str | None) -> bool:
        """Is this recorded step one of an undo (an unknown one is not)?"""
        return any(step.label == text and step.undoing for step in cls)


@dataclass
class MoveRecord:
    wave: int | None
    step: Step
    before: NodeBefore = field(default_factory=NodeBefore)
    evicted: dict[str, int] = field(default_factory=dict)  # namespace/Kind/name -> pods bound before
    version: int = VERSION

    @classmethod
    def of(cls, node: dict) -> MoveRecord | None:
        """The node's record; None when no wave touched it."""
        annotations = view_of(node).annotations
        if BEFORE not in annotations and STEP not in annotations:
            return None
        where = f"annotation {BEFORE}"
        try:
            data = json.loads(annotations.get(BEFORE) or "{}")
        except ValueError:
            raise InputError(where, "not JSON: restore it or remove the node's rollout annotations by hand") from None
        if not isinstance(data, dict):
            raise InputError(where, "not a JSON object: restore it or remove the node's rollout annotations by hand")
        version = data.get("version", 0)  # 0: written before records carried a version
        if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= VERSION:
            # A newer dra-bridge wrote it: read with this one, a step could be skipped or repeated.
            raise InputError(where, f"move record version {version!r} is not one this dra-bridge reads (up to "
                                    f"{VERSION}): continue with the dra-bridge that wrote it")
        evicted = data.get("evicted") or {}
        if not isinstance(evicted, dict) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                    for v in evicted.values()):
            raise InputError(f"{where}.evicted", "expected workload -> pods bound before, as whole numbers")
        wave = annotations.get(WAVE)
        try:
            before = NodeBefore.parse(data, where)
        except ValueError as exc:
            raise InputError(where, f"{exc}: restore it or remove the node's rollout annotations by hand") from exc
        return cls(int(str(wave)) if str(wave or "").isdigit() else None, Step.parse(annotations.get(STEP)),
                   before, {str(k): v for k, v in evicted.items()}, version)

    def switched(self, labels: dict) -> bool:
        """The node's switch labels (`labels`, as read now) are no longer what they were before
        the move: its DRA side was switched on."""
        return any(labels.get(k) != v for k, v in self.before.labels.items())

    def annotations(self) -> dict[str, str | None]:
        body = {**self.before.as_json(), "version": VERSION, "evicted": dict(sorted(self.evicted.items()))}
        return {WAVE: str(self.wave) if self.wave is not None else None, STEP: self.step.label,
                BEFORE: json.dumps(body, sort_keys=True)}


def forget() -> dict[str, None]:
    """The merge patch that removes a record."""
    return {WAVE: None, STEP: None, BEFORE: None}
