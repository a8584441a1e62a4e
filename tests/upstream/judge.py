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
