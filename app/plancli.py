"""`dra-bridge plan`: run the migration planner over manifests offline."""

from __future__ import annotations

import copy
import difflib
import json
import os
import sys
from dataclasses import dataclass, field

import yaml

from app.documents import parse_objects, read_objects
from app.errors import InputError
from app.migrate import plan_pod
from app.policy import load_policy
from app.workloads import pod_templates


@dataclass
class ObjectReport:
    source: str
    kind: str
    name: str
    status: str  # migrated | unchanged | needs-attention
    reasons: list[str] = field(default_factory=list)
    templates: list[str] = field(default_factory=list)


@dataclass
class PlanResult:
    objects: list[tuple[dict, dict]] = field(default_factory=list)  # (original, planned)
    templates: dict[tuple, dict] = field(default_factory=dict)
    reports: list[ObjectReport] = field(default_factory=list)


def _inputs(paths: list[str]) -> list[tuple[str, list[tuple[int, dict]]]]:
    out = []
    for path in paths:
        if path == "-":
            out.append(("<stdin>", parse_objects(sys.stdin.read(), "<stdin>")))
        elif os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(files):
                    if name.endswith((".yaml", ".yml", ".json")):
                        full = os.path.join(root, name)
                        out.append((full, read_objects(full)))
        elif os.path.exists(path):
            out.append((path, read_objects(path)))
        else:
            raise InputError(path, "no such file or folder")
    return out


def plan_objects(inputs, rules, namespace: str | None) -> PlanResult:
    result = PlanResult()
    for source, objects in inputs:
        for line, obj in objects:
            meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
            report = ObjectReport(f"{source}:{line}", str(obj.get("kind", "?")),
                                  str(meta.get("name") or meta.get("generateName") or "?"), "unchanged")
            planned = copy.deepcopy(obj)
            ns = meta.get("namespace") or namespace
            changed = False
            for path, holder in list(pod_templates(planned)):
                plan = plan_pod(holder, rules, ns)
                where = path or "spec"
                if plan.status == "migrated":
                    holder.clear()
                    holder.update(plan.pod)
                    changed = True
                    for template in plan.templates:
                        meta_t = template["metadata"]
                        result.templates[(meta_t.get("namespace", ""), meta_t["name"])] = template
                        report.templates.append(meta_t["name"])
                    report.reasons.extend(f"{where}: {w}" for w in plan.warnings)
                elif plan.status == "unmigratable":
                    report.status = "needs-attention"
                    report.reasons.append(f"{where}: {plan.reason}")
                elif plan.warnings:
                    report.reasons.extend(f"{where}: {w}" for w in plan.warnings)
            if changed and report.status != "needs-attention":
                report.status = "migrated"
            result.objects.append((obj, planned))
            result.reports.append(report)
    return result


def run_plan(args) -> int:
    rules = load_policy(args.policy).migration
    result = plan_objects(_inputs(args.filename), rules, args.namespace)
    out = sys.stdout
    if args.output == "yaml":
        docs = list(result.templates.values()) + [p for _o, p in result.objects]
        out.write(yaml.safe_dump_all(docs, sort_keys=False, width=120))
    elif args.output == "json":
        out.write(json.dumps({
            "objects": [r.__dict__ for r in result.reports],
            "templates": list(result.templates.values()),
        }, indent=2) + "\n")
    else:
        for (original, planned), report in zip(result.objects, result.reports):
            if original == planned:
                continue
            before = yaml.safe_dump(original, sort_keys=False).splitlines(keepends=True)
            after = yaml.safe_dump(planned, sort_keys=False).splitlines(keepends=True)
            out.writelines(difflib.unified_diff(before, after, f"{report.source} (legacy)",
                                                f"{report.source} (dra)"))
    _summary(result.reports, sys.stderr)
    return 0


def _summary(reports: list[ObjectReport], stream) -> None:
    counts: dict[str, int] = {}
    for report in reports:
        counts[report.status] = counts.get(report.status, 0) + 1
        if report.status == "needs-attention":
            stream.write(f"needs attention: {report.kind}/{report.name} ({report.source}): "
                         f"{'; '.join(report.reasons)}\n")
    stream.write("summary: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + "\n")
