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


def nodes_of(case: dict) -> list[dict]:
    """The case's node plus a bare node for every other nodeName its slices mention."""
    nodes = {case["node"]["metadata"]["name"]: case["node"]}
    for s in case["slices"]:
        name = s["spec"].get("nodeName")
        if name and name not in nodes:
            nodes[name] = {"metadata": {"name": name}}
    return list(nodes.values())


def nodes_known_to_us(case: dict) -> list[dict]:
    """The nodes our inventory knows: those its slices name (we read no Node objects), or one
    node when only network-attached slices exist."""
    named = {s["spec"].get("nodeName") for s in case["slices"]} | {
        d.get("nodeName") for s in case["slices"] for d in s["spec"].get("devices") or []}
    known = [n for n in case["nodes"] if n["metadata"]["name"] in named]
    return known or case["nodes"][:1]


def oracle_allocate_request(case: dict, features=None, nodes=None) -> dict:
    """Features None: the oracle's default, Kubernetes 1.37's feature gates."""
    request = {"op": "allocate", "slices": case["slices"], "classes": case["classes"], "claims": case["claims"],
               "allocatedDevices": case["allocated"], "nodes": nodes or [case["node"]]}
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
    nodes = {n["metadata"]["name"]: dict(n["metadata"].get("labels") or {}) for n in case.get("nodes") or nodes_of(case)}
    inventory = dra.Inventory(slices=case["slices"], classes={c["metadata"]["name"]: c for c in case["classes"]},
                              nodes=nodes)
    allocated = {(a["driver"], a["pool"], a["device"]) for a in case["allocated"]}
    try:
        index = dra.build_index(inventory, allocated)
        verdict = dra.check(dra.parse_claim_spec(claim["spec"]), index)
    except dra.ClaimError as exc:
        return "error", f"ClaimError: {exc}"
    except Exception as exc:  # a crash is a disagreement to report, not a test error
        return "crash", f"{type(exc).__name__}: {exc}"
    return OUR_TO_ORACLE[verdict.status], f"{verdict.status}: {verdict.message}"


# Gaps we know of, by the feature a generated case uses (issue 11 closes them).
KNOWN_GAPS = {
    "shared-counters": "shared counters (partitionable devices) are not modelled",
    "node-selector": "nodeSelector / per-device node selection: reachable from every node for us",
    "list-attributes": "list-typed attributes: matchAttribute / distinctAttribute over lists not modelled",
    "version-match": "matchAttribute on a version attribute",
    "consumable-capacity": "consumable capacity (devices shared by several allocations, capacity requests) is "
                           "not modelled",
    "admin-access": "adminAccess allocation semantics are not modelled",
    "distinctAttribute": "distinctAttribute is exact only when one constraint covers the requests",
    "all": "allocationMode All over incomplete pools differs",
    "nodes-without-devices": "nodes without devices of their own are unknown to us (no Node objects read)",
    "cel-runtime-error": "a CEL runtime error (lookup of an attribute a device lacks) aborts allocation upstream; "
                         "ours counts it as no match",
    "all-with-constraint": "allocationMode All with a constraint that excludes a device is an error upstream",
}
# Features a generated case records (generators.py) -> the gap each can cause.
FEATURE_GAPS = {"shared-counters": "shared-counters", "node-selector": "node-selector",
                "list-attributes": "list-attributes", "version-match": "version-match",
                "multiple-allocations": "consumable-capacity", "capacity-requests": "consumable-capacity",
                "admin-access": "admin-access", "distinctAttribute": "distinctAttribute", "all": "all",
                "unguarded-selectors": "cel-runtime-error"}


def explain(case: dict, oracle_answer: dict, ours: str) -> list[str]:
    """The known gaps that can account for a disagreement on a generated case."""
    causes = [KNOWN_GAPS[FEATURE_GAPS[f]] for f in case["features_used"] if f in FEATURE_GAPS]
    if len(nodes_known_to_us(case)) < len(case["nodes"]):
        causes.append(KNOWN_GAPS["nodes-without-devices"])
    errors = " ".join(n["error"] or "" for n in oracle_answer["nodes"])
    if "CEL runtime error" in errors or "no such key" in errors:
        causes.append(KNOWN_GAPS["cel-runtime-error"])
    if "because a claim constraint would not be satisfied" in errors:
        causes.append(KNOWN_GAPS["all-with-constraint"])
    if ours == "crash":
        causes.append("our feasibility crashed")
    return causes


def case_yaml(case: dict) -> str:
    import yaml

    shown = {k: case[k] for k in ("features_used", "classes", "slices", "allocated", "claims")}
    return yaml.safe_dump(shown, sort_keys=False, width=120)


# -- attribution by ablation: remove one known gap at a time until we agree -----------------
def _devices(case):
    for s in case["slices"]:
        yield from s["spec"].get("devices") or []


def _exacts(case):
    for request in case["claims"][0]["spec"]["devices"]["requests"]:
        if "exactly" in request:
            yield request["exactly"]
        yield from request.get("firstAvailable") or []


def _drop_counters(case):
    case["slices"] = [s for s in case["slices"] if not s["spec"].get("sharedCounters")]
    for s in case["slices"]:
        s["spec"]["pool"]["resourceSliceCount"] = sum(
            1 for o in case["slices"] if o["spec"]["pool"]["name"] == s["spec"]["pool"]["name"])
    for d in _devices(case):
        d.pop("consumesCounters", None)


def _drop_sharing(case):
    for d in _devices(case):
        d.pop("allowMultipleAllocations", None)
        for capacity in (d.get("capacity") or {}).values():
            capacity.pop("requestPolicy", None)
    for e in _exacts(case):
        e.pop("capacity", None)


def _drop_admin(case):
    for e in _exacts(case):
        e.pop("adminAccess", None)


def _drop_node_selectors(case):
    for s in case["slices"]:
        spec = s["spec"]
        if spec.pop("nodeSelector", None) is not None:
            spec["allNodes"] = True
        if spec.pop("perDeviceNodeSelection", None):
            spec["allNodes"] = True
            for d in spec.get("devices") or []:
                d.pop("nodeName", None)


def _drop_lists(case):
    for d in _devices(case):
        d["attributes"] = {k: v for k, v in (d.get("attributes") or {}).items() if not ({"ints", "strings"} & set(v))}
    for constraint in case["claims"][0]["spec"]["devices"].get("constraints") or []:
        if constraint.get("matchAttribute", "").endswith("/tags"):
            constraint["matchAttribute"] = "gpu.example.com/model"


def _drop_version_match(case):
    for constraint in case["claims"][0]["spec"]["devices"].get("constraints") or []:
        if constraint.get("matchAttribute", "").endswith("driverVersion"):
            constraint["matchAttribute"] = "gpu.example.com/model"


def _guard_selectors(case):
    from tests.upstream.generators import guarded

    for e in _exacts(case):
        for selector in e.get("selectors") or []:
            selector["cel"]["expression"] = guarded(selector["cel"]["expression"])


ABLATIONS = [
    (KNOWN_GAPS["cel-runtime-error"], _guard_selectors),
    (KNOWN_GAPS["nodes-without-devices"], None),
    (KNOWN_GAPS["node-selector"], _drop_node_selectors),
    (KNOWN_GAPS["shared-counters"], _drop_counters),
    (KNOWN_GAPS["consumable-capacity"], _drop_sharing),
    (KNOWN_GAPS["admin-access"], _drop_admin),
    (KNOWN_GAPS["list-attributes"], _drop_lists),
    (KNOWN_GAPS["version-match"], _drop_version_match),
]


def attribute(case: dict, oracle) -> str:
    """The first known gap whose removal (cumulatively, in ABLATIONS order) makes us agree, or
    what remains: a CEL runtime error upstream aborts on, All with constraints, or unexplained."""
    import copy

    work = copy.deepcopy(case)
    nodes = work["nodes"]
    answer = None
    for cause, ablate in ABLATIONS:
        if ablate is None:
            nodes = nodes_known_to_us(work)
        else:
            ablate(work)
        answer = oracle.ask(oracle_allocate_request(work, nodes=nodes))
        if our_allocation(work)[0] == allocation_outcome(answer):
            return cause
    errors = " ".join(n["error"] or "" for n in answer["nodes"])
    if "because a claim constraint would not be satisfied" in errors:
        return KNOWN_GAPS["all-with-constraint"]
    if "distinctAttribute" in str(work["claims"]):
        return KNOWN_GAPS["distinctAttribute"]
    return "unexplained"
