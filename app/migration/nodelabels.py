"""GPU Feature Discovery node labels (nodeSelector, required node affinity) -> CEL selectors.

Pure. Node labels describe a node; CEL selectors describe a device. We translate what has an
exact device equivalent and keep everything else on the node side, where it stays correct
for as long as GFD keeps labelling nodes.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from app.policy import MigrationRules

from . import cel_selectors as sel
from .gfd_labels import LabelTranslator, Untranslatable


@dataclass
class NodeConstraints:
    """What the pod's node constraints mean for devices of each type."""

    selectors: dict[str, list[sel.Node]] = field(default_factory=lambda: {"gpu": [], "mig": []})
    mig_profile: str | None = None  # MIG single strategy: nvidia.com/gpu means a MIG device
    mig_gaps: list[str] = field(default_factory=list)  # labels with no MIG-device meaning
    shared: str | None = None  # "label=value" when the pod targets time-sliced / MPS-shared GPUs
    notes: list[str] = field(default_factory=list)
    translated: list[str] = field(default_factory=list)  # "nodeSelector[key]" and friends
    spec_after: dict | None = None  # nodeSelector/affinity after translated labels are removed


def _term_expressions(term: dict) -> list[dict]:
    exprs = term.get("matchExpressions") or []
    return [e for e in exprs if isinstance(e, dict)]


def _combine(per_type: list[dict[str, sel.Node | None]]) -> dict[str, list[sel.Node]]:
    out: dict[str, list[sel.Node]] = {"gpu": [], "mig": []}
    for item in per_type:
        for kind, expr in item.items():
            if expr is not None:
                out[kind].append(expr)
    return out


def translate(spec: dict, rules: MigrationRules) -> NodeConstraints:
    """Translate nodeSelector and required node affinity; never mutates `spec`."""
    tr = LabelTranslator(rules)
    result = NodeConstraints()
    # Only these two fields are rewritten; copy them, not the whole spec.
    after = {k: copy.deepcopy(spec[k]) for k in ("nodeSelector", "affinity") if k in spec}
    remove = rules.removeTranslatedLabels

    node_selector = spec.get("nodeSelector")
    if isinstance(node_selector, dict):
        for key, value in node_selector.items():
            if not tr.covers(key):
                continue
            try:
                per_type = tr.expression(key, "In", [value])
            except Untranslatable as why:
                result.notes.append(f"nodeSelector {key} kept on the node: {why}")
                continue
            for kind, expr in per_type.items():
                if expr is not None:
                    result.selectors[kind].append(expr)
            if "mig" not in per_type:
                result.mig_gaps.append(key)
            result.translated.append(f"nodeSelector[{key}]")
            if remove and not tr.keeps(key):
                del after["nodeSelector"][key]
        if remove and not after.get("nodeSelector"):
            after.pop("nodeSelector", None)

    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = [t for t in (required.get("nodeSelectorTerms") or []) if isinstance(t, dict)]
    if terms:
        _translate_terms(terms, tr, result, after, remove)

    result.shared = tr.shared
    if len(tr.mig_profiles) == 1:
        result.mig_profile = next(iter(tr.mig_profiles))
        _keep_mig_gaps_on_the_node(node_selector, after, result)
    result.spec_after = after
    return result


def _keep_mig_gaps_on_the_node(node_selector, after: dict, result: NodeConstraints) -> None:
    """With MIG single strategy the pod gets MIG devices, which such labels (gpu.memory: the MIG
    slice's memory there) do not describe as selectors: they stay node selection, never dropped
    on both sides."""
    if not isinstance(node_selector, dict):
        return
    for key in [k for k in result.mig_gaps if k in node_selector]:
        after.setdefault("nodeSelector", {})[key] = node_selector[key]
        if f"nodeSelector[{key}]" in result.translated:
            result.translated.remove(f"nodeSelector[{key}]")
        result.mig_gaps.remove(key)
        result.notes.append(f"nodeSelector {key} kept on the node: MIG devices are asked for, and it "
                            "describes the node's MIG partitions, not a selector on them")


def _translate_terms(terms: list[dict], tr: LabelTranslator, result: NodeConstraints,
                     after: dict, remove: bool) -> None:
    """Terms are ORed. We only move them when the split between node and device is exact."""
    gfd_keys = [[tr.covers(str(e.get("key"))) for e in _term_expressions(t)] for t in terms]
    if not any(any(keys) for keys in gfd_keys):
        return
    if len(terms) == 1:
        _translate_single_term(terms[0], tr, result, after, remove)
        return
    if not all(keys and all(keys) for keys in gfd_keys) or any(t.get("matchFields") for t in terms):
        result.notes.append("node affinity mixes GFD and other labels across several terms; kept on the node")
        return
    alternatives: dict[str, list[sel.Node]] = {"gpu": [], "mig": []}
    try:
        for term in terms:
            combined = _combine([tr.expression(str(e["key"]), str(e.get("operator")), e.get("values") or [])
                                 for e in _term_expressions(term)])
            for kind in ("gpu", "mig"):
                alternatives[kind].append(sel.all_of(combined[kind]))  # no condition: true
    except Untranslatable as why:
        result.notes.append(f"node affinity kept on the node: {why}")
        return
    for kind in ("gpu", "mig"):
        result.selectors[kind].append(sel.any_of(alternatives[kind]))
    result.translated.append("affinity.nodeSelectorTerms")
    if remove and not any(tr.keeps(str(e.get("key"))) for t in terms for e in _term_expressions(t)):
        _drop_required(after)


def _translate_single_term(term: dict, tr: LabelTranslator, result: NodeConstraints,
                           after: dict, remove: bool) -> None:
    kept = []
    for expr in _term_expressions(term):
        key = str(expr.get("key"))
        if not tr.covers(key):
            kept.append(expr)
            continue
        try:
            per_type = tr.expression(key, str(expr.get("operator")), expr.get("values") or [])
        except Untranslatable as why:
            result.notes.append(f"node affinity {key} kept on the node: {why}")
            kept.append(expr)
            continue
        for kind, cel in per_type.items():
            if cel is not None:
                result.selectors[kind].append(cel)
        if "mig" not in per_type:
            result.mig_gaps.append(key)
        result.translated.append(f"affinity[{key}]")
        if tr.keeps(key):
            kept.append(expr)
    if not remove:
        return
    term_after = after["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]
    if kept:
        term_after["matchExpressions"] = kept
    else:
        term_after.pop("matchExpressions", None)
    if not term_after:
        _drop_required(after)


def _drop_required(after: dict) -> None:
    node_affinity = after["affinity"]["nodeAffinity"]
    node_affinity.pop("requiredDuringSchedulingIgnoredDuringExecution", None)
    if not node_affinity:
        after["affinity"].pop("nodeAffinity")
    if not after["affinity"]:
        after.pop("affinity")
