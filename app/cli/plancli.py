"""`dra-bridge plan`: run the migration planner over manifests offline."""

from __future__ import annotations

import difflib
import json
import os
import sys
from dataclasses import asdict

from app import dra
from app.application import inventory_source
from app.application.manifests import STATUSES, ObjectReport, ReportStatus, exit_status, manifest_facts, plan_objects
from app.common import dump_document, dump_documents
from app.policy import default_policy

from .inputs import cluster_of, choose_inventory, flag_release, read_some_inputs
from .output import as_json_list, clip
from .servedpolicy import live_policy_or

# Each status's terminal colour (0: none); a status without one fails tests/unit/test_outcome_words.py.
COLOURS = {ReportStatus.MIGRATED: "32", ReportStatus.UNCHANGED: "0", ReportStatus.UNSATISFIABLE: "31",
           ReportStatus.NEEDS_ATTENTION: "33"}


SERVER_SET = ("uid", "resourceVersion", "managedFields", "creationTimestamp", "generation", "selfLink")


def applyable(obj: dict) -> dict:
    """The object as `kubectl apply -f -` takes it: without the fields the server sets."""
    out = {k: v for k, v in obj.items() if k != "status"}
    if isinstance(obj.get("metadata"), dict):
        out["metadata"] = {k: v for k, v in obj["metadata"].items() if k not in SERVER_SET}
    return out


def _colour(text: str, status: ReportStatus, enabled: bool) -> str:
    return f"\x1b[{COLOURS[status]}m{text}\x1b[0m" if enabled and COLOURS[status] != "0" else text


def summary_table(reports: list[ObjectReport], stream, colour: bool, wide: bool = False) -> None:
    """wide: every reason, uncut (the cost or the cause is often past the cut)."""
    width = max([len(f"{r.kind}/{r.name}") for r in reports] + [6])
    stream.write(f"{'STATUS':16s} {'PATH':14s} {'OBJECT':{width}s} DETAIL\n")
    for r in reports:
        if r.quiet:
            continue
        detail = "; ".join(r.reasons if wide else r.reasons[:2])
        stream.write(f"{_colour(f'{r.status:16s}', r.status, colour)} {r.path:14s} {f'{r.kind}/{r.name}':{width}s} "
                     f"{detail if wide else clip(detail, 160)}  "
                     f"[{r.source}]\n")
    counts = {s: sum(r.status == s for r in reports) for s in STATUSES}
    stream.write("summary: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + f" (of {len(reports)} objects)\n")


def run_plan(args) -> int:
    connect = cluster_of(args)
    policy = live_policy_or(args, connect, default_policy)
    inputs = read_some_inputs(args.filename)
    inventory, where = choose_inventory(args.inventory, connect, args)
    ix = dra.build_index(inventory) if inventory is not None else None
    release = inventory.release if inventory is not None else flag_release(args)
    sys.stderr.write(f"judged against: {inventory_source(ix, where, release)}\n")
    # Manifests are what is proposed: the opt-in label is not judged (audit judges it), but the
    # policy's namespace rules are, with the labels of Namespace objects given.
    result = plan_objects(inputs, policy, args.namespace, manifest_facts(inputs, policy, ix, where, release))
    out = sys.stdout
    if args.output in ("yaml", "json"):  # one content, two spellings (kubectl's)
        docs = list(result.templates.values()) + [applyable(p) for _o, p in result.objects]
        out.write(dump_documents(docs) if args.output == "yaml" else as_json_list(docs))
    elif args.output in ("table", "wide"):  # the summary alone, on stdout (kubectl's -o wide: uncut)
        summary_table(result.reports, out, out.isatty() and not os.environ.get("NO_COLOR"),
                      args.output == "wide" or args.wide)
        return exit_status([r.status for r in result.reports])
    elif args.output == "report":
        out.write(json.dumps({"objects": [asdict(r) for r in result.reports],
                              "templates": list(result.templates.values()),
                              "inventoryChecked": ix is not None}, indent=2) + "\n")
    else:
        for template in result.templates.values():  # new objects: a diff from nothing
            name = f"ResourceClaimTemplate/{template['metadata']['name']}"
            out.writelines(difflib.unified_diff([], dump_document(template).splitlines(keepends=True), "/dev/null",
                                                f"{name} (new)"))
        for (original, planned), report in zip(result.objects, result.reports):
            if original == planned:
                continue
            before = dump_document(original).splitlines(keepends=True)
            after = dump_document(planned).splitlines(keepends=True)
            out.writelines(difflib.unified_diff(before, after, f"{report.source} (legacy)", f"{report.source} (dra)"))
    colour = sys.stderr.isatty() and not os.environ.get("NO_COLOR")
    summary_table(result.reports, sys.stderr, colour, getattr(args, "wide", False))
    return exit_status([r.status for r in result.reports])


