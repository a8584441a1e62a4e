"""The inventory as a Kubernetes release keeps it: an API server drops the fields of DRA features
that are off there without a word, and its scheduler then allocates what is left (a tainted GPU
is healthy, counters are gone, nothing is shared, no class serves an extended resource). An export
judged for another release, or an example inventory, is read the way that release would store it.
Pure."""

from __future__ import annotations

from dataclasses import replace

from app.common import release as releases

from .inventory import Inventory


def as_kept_by(inventory: Inventory, release: releases.Release) -> tuple[Inventory, list[str]]:
    """(the inventory with every field `release` drops removed, one line per kind of loss)."""
    lost: dict[str, int] = {}

    def kept(obj: dict, kind: str) -> dict:
        out, losses = releases.strip(obj, release, kind)
        for loss in losses:
            key = f"{kind} {_pattern(loss.path)} ({loss.gate} is off)"
            lost[key] = lost.get(key, 0) + 1
        return out

    slices = [kept(s, "ResourceSlice") if isinstance(s, dict) else s for s in inventory.slices]
    classes = {name: kept(c, "DeviceClass") for name, c in inventory.classes.items()}
    rules = inventory.taint_rules
    if rules and not (release.has(releases.DEVICE_TAINT_RULES) and release.has(releases.DEVICE_TAINTS)):
        lost[f"DeviceTaintRule ({releases.DEVICE_TAINT_RULES} is off)"] = len(rules)
        rules = []
    said = [f"{count} x {what}" for what, count in sorted(lost.items())]
    return replace(inventory, slices=slices, classes=classes, taint_rules=rules, release=release), said


def _pattern(path: str) -> str:
    """spec.devices[3].taints -> spec.devices[].taints: one line per field, not per device."""
    out, depth = [], 0
    for ch in path:
        if ch == "[":
            depth += 1
            out.append("[]")
        elif ch == "]":
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)
