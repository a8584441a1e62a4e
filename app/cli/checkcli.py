"""`dra-bridge check`: validate ResourceClaims and ResourceClaimTemplates offline against an inventory."""

from __future__ import annotations

import json
import sys

from app import dra
from app.common import InputError
from app.server.validation import admin_label_rule

from .inputs import load_inventory, read_inputs


def check_object(obj: dict, ix: dra.Index, namespaces: dict | None = None) -> dra.Verdict:
    """namespaces: name -> labels from the inventory (None: none read, the admin-access rule unchecked)."""
    try:
        parsed = dra.parse_claim_object(obj)
    except dra.ClaimError as exc:
        return dra.Verdict("invalid", str(exc))
    if namespaces is not None:
        namespace = (obj.get("metadata") or {}).get("namespace") or "default"
        refused = admin_label_rule(parsed, namespace, namespaces.get(namespace, {}))
        if refused:
            return dra.Verdict("invalid", refused[0].message)
    return dra.check(parsed, ix, count_nodes=True)


def run_check(args) -> int:
    inventory = load_inventory(args.inventory)
    if not args.inventory:
        sys.stderr.write("judging against the bundled example inventory (8×H100, an A100 node with MIG, 4×L4), "
                         "not your cluster: pass --inventory FILE (kubectl get resourceslices,deviceclasses,"
                         "resourceclaims,devicetaintrules,nodes,namespaces -A -o yaml)\n")
    ix = dra.build_index(inventory)
    rows = []
    for source, objects in read_inputs(args.filename):
        for line, obj in objects:
            if obj.get("kind") not in dra.CLAIM_KINDS:
                continue
            meta = obj.get("metadata") or {}
            verdict = check_object(obj, ix, inventory.namespaces)
            rows.append({"source": f"{source}:{line}", "kind": obj["kind"], "name": meta.get("name", "?"),
                         "status": verdict.status, "message": verdict.message, "closest": verdict.closest,
                         "warnings": verdict.errors, "notes": verdict.notes})
    if args.output == "json":
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
    else:
        for row in rows:
            sys.stdout.write(f"{row['status']:18s} {row['kind']}/{row['name']} ({row['source']}): {row['message']}\n")
            for hint in row["closest"]:
                sys.stdout.write(f"{'':18s}   closest: {hint}\n")
            for note in row["notes"]:
                sys.stdout.write(f"{'':18s}   note: {note}\n")
    if not rows:
        raise InputError(" ".join(args.filename), "no ResourceClaim or ResourceClaimTemplate to check "
                                                   "(pods and workloads: `dra-bridge plan`)")
    return 0 if all(r["status"] == "satisfiable" for r in rows) else 1
