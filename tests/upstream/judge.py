"""Our verdicts in the oracle's terms, so each differential test compares like with like."""

from __future__ import annotations

from app import dra


def oracle_cel_request(case: dict) -> dict:
    device = {"driver": case["driver"], "attributes": case["attributes"], "capacity": case["capacity"],
              "allowMultipleAllocations": case["allowMultipleAllocations"]}
    request = {"op": "cel", "expression": case["expression"], "device": device, "envType": case["env"]}
    if case.get("features"):
        request["celFeatures"] = case["features"]
    return request


def cel_outcome(answer: dict) -> tuple[str, object]:
    """('invalid' | 'runtime-error' | 'match', detail) of an oracle answer: invalid is what the API
    server refuses at creation (too long, compile error, too expensive)."""
    if answer["validationError"] is not None:
        return "invalid", answer["validationError"]
    if answer["matchError"] is not None:
        return "runtime-error", answer["matchError"]
    return "match", answer["match"]


def our_cel(case: dict) -> tuple[tuple[str, object], int | None]:
    """Our outcome for the same expression and device, and our cost estimate."""
    expression = case["expression"]
    features = case.get("features") or {}
    cost = dra.estimated_cost(expression)
    try:
        selector = dra.compile_selector(expression, bool(features.get("listTypeAttributes")),
                                        features.get("consumableCapacity", True) is not False)
    except dra.CelError as exc:
        return ("invalid", str(exc)), cost
    try:
        device = dra.device_variable(case["driver"], {"attributes": case["attributes"], "capacity": case["capacity"]},
                                     bool(case["allowMultipleAllocations"]))
    except (ValueError, TypeError, KeyError) as exc:
        return ("crash", f"{type(exc).__name__}: {exc}"), cost
    try:
        return ("match", selector.matches(device)), cost
    except dra.CelError as exc:
        return ("runtime-error", str(exc)), cost


# -- allocation --------------------------------------------------------------------------


def nodes_of(case: dict) -> list[dict]:
    """The case's node plus a bare node for every other nodeName its slices mention."""
    nodes = {case["node"]["metadata"]["name"]: case["node"]}
    for s in case["slices"]:
        name = s["spec"].get("nodeName")
        if name and name not in nodes:
            nodes[name] = {"metadata": {"name": name}}
    return list(nodes.values())


def oracle_allocate_request(case: dict, features=None, nodes=None) -> dict:
    """Features None: the oracle's default, Kubernetes 1.37's feature gates."""
    request = {"op": "allocate", "slices": case["slices"], "classes": case["classes"], "claims": case["claims"],
               "allocatedDevices": case["allocated"], "allocatedClaims": case.get("allocated_claims") or [],
               "nodes": nodes or [case["node"]]}
    if features is not None:
        request["features"] = features
    return request


def allocation_outcome(answer: dict) -> str:
    """The allocator's answer: satisfiable (some node allocates) | error (upstream aborts) | unsatisfiable."""
    nodes = answer["nodes"]
    if any(n["allocations"] for n in nodes):
        return "satisfiable"
    if any(n["error"] for n in nodes):
        return "error"
    return "unsatisfiable"


def scheduler_outcome(answer: dict, case: dict) -> str:
    """What the scheduler does with the pod, from the allocator's answer per node: its PreFilter
    leaves the pod Unschedulable while a DeviceClass is missing; with fewer than 100 nodes it
    filters every node and an error on any one fails the scheduling cycle, except one the
    allocator marks ErrFailedAllocationOnNode (invalid pools): that node only is unschedulable."""
    classes = {c["metadata"]["name"] for c in case["classes"]}
    for claim in case["claims"]:
        for request in claim["spec"]["devices"]["requests"]:
            for alternative in [request.get("exactly")] + list(request.get("firstAvailable") or []):
                if isinstance(alternative, dict) and alternative.get("deviceClassName") not in classes:
                    return "unsatisfiable"
    nodes = answer["nodes"]
    fatal = [n for n in nodes if n["error"] and not n.get("nodeOnly")]
    if len(nodes) < 100 and fatal:
        return "error"
    if any(n["allocations"] for n in nodes):
        return "satisfiable"
    return "error" if fatal else "unsatisfiable"


def results_of(node_answer: dict) -> list[list[tuple]] | None:
    if not node_answer["allocations"]:
        return None
    return [[(r["request"], r["driver"], r["pool"], r["device"]) for r in a["devices"]["results"]]
            for a in node_answer["allocations"]]


OUR_TO_ORACLE = {"satisfiable": "satisfiable", "unsatisfiable-now": "unsatisfiable", "never": "unsatisfiable",
                 "invalid": "error"}


def our_allocation(case: dict) -> tuple[str, str]:
    """Our verdict for the case's one claim over every node, in oracle terms, and its message."""
    [claim] = case["claims"]
    nodes = {n["metadata"]["name"]: dict(n["metadata"].get("labels") or {}) for n in case.get("nodes") or nodes_of(case)}
    inventory = dra.Inventory(slices=case["slices"], classes={c["metadata"]["name"]: c for c in case["classes"]},
                              nodes=nodes)
    holders = case.get("allocated_claims") or []
    allocated = {(a["driver"], a["pool"], a["device"]) for a in case["allocated"]} | dra.allocated_devices(holders)
    try:
        index = dra.build_index(inventory, allocated, dra.allocated_capacity(holders), dra.shared_devices(holders))
        verdict = dra.check(dra.parse_claim_spec(claim["spec"]), index)
    except dra.ClaimError as exc:
        return "error", f"ClaimError: {exc}"
    except Exception as exc:  # a crash is a disagreement to report, not a test error
        return "crash", f"{type(exc).__name__}: {exc}"
    return OUR_TO_ORACLE[verdict.status], f"{verdict.status}: {verdict.message}"


def case_yaml(case: dict) -> str:
    import yaml

    shown = {k: case.get(k) for k in ("features_used", "classes", "slices", "allocated", "allocated_claims", "claims")}
    return yaml.safe_dump(shown, sort_keys=False, width=120)


def our_check(case: dict, exported: list) -> tuple[str, str]:
    """Our verdict through the CLI's path: the case exported as a file's objects, read as
    `check --inventory FILE` reads them, the claim judged as `check -f` judges it."""
    from app.cli.checkcli import check_object

    try:
        inventory = dra.inventory_from_objects(exported, "export.yaml")
        verdict = check_object(case["claims"][0], dra.build_index(inventory), inventory.namespaces)
    except Exception as exc:  # a crash is a disagreement to report
        return "crash", f"{type(exc).__name__}: {exc}"
    return OUR_TO_ORACLE[verdict.status], f"{verdict.status}: {verdict.message}"
