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
    try:
        selector = dra.compile_selector(expression)
    except dra.CelError as exc:
        return ("invalid", str(exc)), None
    cost = dra.estimated_cost(expression)
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
DEFAULT_FEATURES = None  # the oracle's default: Kubernetes 1.37's feature gates


def nodes_of(case: dict) -> list[dict]:
    """The case's node plus a bare node for every other nodeName its slices mention."""
    nodes = {case["node"]["metadata"]["name"]: case["node"]}
    for s in case["slices"]:
        name = s["spec"].get("nodeName")
        if name and name not in nodes:
            nodes[name] = {"metadata": {"name": name}}
    return list(nodes.values())


def oracle_allocate_request(case: dict, features=DEFAULT_FEATURES, nodes=None, allocated=True) -> dict:
    request = {"op": "allocate", "slices": case["slices"], "classes": case["classes"], "claims": case["claims"],
               "allocatedDevices": case["allocated"] if allocated else [], "nodes": nodes or [case["node"]]}
    if features is not None:
        request["features"] = features
    return request


def allocation_outcome(answer: dict) -> str:
    """satisfiable (some node allocates) | error (upstream aborts) | unsatisfiable."""
    nodes = answer["nodes"]
    if any(n["allocations"] for n in nodes):
        return "satisfiable"
    if any(n["error"] for n in nodes):
        return "error"
    return "unsatisfiable"


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
    inventory = dra.Inventory(slices=case["slices"], classes={c["metadata"]["name"]: c for c in case["classes"]})
    allocated = {(a["driver"], a["pool"], a["device"]) for a in case["allocated"]}
    try:
        index = dra.build_index(inventory, allocated)
        verdict = dra.check(dra.parse_claim_spec(claim["spec"]), index)
    except dra.ClaimError as exc:
        return "error", f"ClaimError: {exc}"
    except Exception as exc:  # a crash is a disagreement to report, not a test error
        return "crash", f"{type(exc).__name__}: {exc}"
    return OUR_TO_ORACLE[verdict.status], f"{verdict.status}: {verdict.message}"
