"""`dra-bridge check`: validate ResourceClaims and ResourceClaimTemplates offline against an inventory."""

from __future__ import annotations

import json
import sys

from app import dra
from app.common import InputError, view_of
from app.common import release as releases
from app.application import EveryNamespace, admin_label_rule, chain, cluster_facts, inventory_source
from app.application.manifests import objects_of

from .output import as_yaml, clip
from .inputs import INVENTORY_HELP, cluster_of, choose_inventory, read_inputs
from .servedpolicy import live_policy_or


def check_object(obj: dict, ix: dra.Index, namespaces: dict | None = None) -> dra.Verdict:
    """namespaces: name -> labels from the inventory (None: none read, the admin-access rule unchecked).
    The claim is judged as the inventory's release would store it: the fields it drops are said."""
    release = ix.release
    obj, lost = releases.strip(obj, release) if release is not None else (obj, [])
    verdict = _judged(obj, ix, namespaces)
    if lost:
        verdict.notes = [f"Kubernetes {release.version} drops {', '.join(map(str, lost))}: "
                         "judged as it would be stored", *verdict.notes]
    return verdict


def _judged(obj: dict, ix: dra.Index, namespaces: dict | None) -> dra.Verdict:
    try:
        parsed = dra.parse_claim_object(obj)
    except dra.ClaimError as exc:
        return dra.Verdict("invalid", str(exc))
    if namespaces is not None:
        namespace = view_of(obj).namespace or "default"
        refused = admin_label_rule(parsed, namespace, namespaces.get(namespace, {}))
        if refused:
            return dra.Verdict("invalid", refused[0].message)
    return dra.check(parsed, ix, count_nodes=True)


def run_check(args) -> int:
    connect = cluster_of(args)
    inventory, where = choose_inventory(args.inventory, connect, args)
    if inventory is None:
        raise InputError("--inventory", f"check judges claims against devices: name them ({INVENTORY_HELP})")
    ix = dra.build_index(inventory)
    sys.stderr.write(f"judged against: {inventory_source(ix, where)}\n")
    inputs = read_inputs(args.filename)
    policy = live_policy_or(args, connect, lambda: None)  # offline, rules are judged where --policy names them
    judge = _policy_judge(policy, ix, inputs, inventory.namespaces or {}) if policy is not None else None
    rows = []
    for source, objects in inputs:
        for line, obj in objects:
            if obj.get("kind") not in dra.CLAIM_KINDS and not (judge and obj.get("kind") == "Pod"):
                continue
            row = {"source": f"{source}:{line}", "kind": obj["kind"], "name": view_of(obj).name or "?",
                   "status": "pod", "message": "judged by the policy's rules (feasibility: its claims)", "closest": [],
                   "warnings": [], "notes": []}
            if obj["kind"] != "Pod":
                verdict = check_object(obj, ix, inventory.namespaces)
                row.update(status=verdict.status, message=verdict.message, closest=verdict.closest,
                           warnings=verdict.errors, notes=verdict.notes)
            if judge is not None:
                found = judge(obj)
                row["policy"], row["policyMessages"] = found.result, found.messages
            rows.append(row)
    if args.output == "json":
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
    elif args.output == "yaml":  # the same content as json
        sys.stdout.write(as_yaml(rows))
    else:
        for row in rows:
            sys.stdout.write(f"{row['status']:18s} {row['kind']}/{row['name']} ({row['source']}): {row['message']}\n")
            for hint in row["closest"]:
                sys.stdout.write(f"{'':18s}   closest: {hint}\n")
            for note in row["notes"]:
                sys.stdout.write(f"{'':18s}   note: {note}\n")
            for warning in row["warnings"] if args.output == "wide" else []:
                sys.stdout.write(f"{'':18s}   warning: {warning}\n")
            if "policy" in row:
                sys.stdout.write(f"{'':18s}   policy: {row['policy']}\n")
                for said in row["policyMessages"] if row["policy"] != "allow" else []:
                    sys.stdout.write(f"{'':18s}     {said if args.output == 'wide' else clip(said, 400)}\n")
    if not rows:
        raise InputError(" ".join(args.filename), "no ResourceClaim or ResourceClaimTemplate to check "
                                                   "(pods and workloads: `dra-bridge plan`)")
    fine = all(r["status"] in ("satisfiable", "pod") and r.get("policy") != "deny" for r in rows)
    return 0 if fine else 1


def _policy_judge(policy, ix: dra.Index, inputs, namespaces: dict):
    """What the webhooks answer for each object under the policy (application.chain): claims a pod
    names are read from the same input."""
    facts = cluster_facts(policy, ix, source=inventory_source(ix, "inventory"), objects=objects_of(inputs),
                          claims_known=True, namespaces=EveryNamespace(namespaces))

    def judge(obj: dict):
        return chain.answer(obj, view_of(obj).namespace or "default", policy, facts)
    return judge

