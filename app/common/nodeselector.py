"""Node selection as upstream's nodeaffinity evaluates a v1 NodeSelector (a ResourceSlice's, a
pod's required node affinity), and a toleration against a taint. Pure."""

from __future__ import annotations


def _number(text) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None


def _requirement_holds(req: dict, value, present: bool) -> bool:
    operator, values = req.get("operator"), [str(v) for v in req.get("values") or []]
    if operator == "In":
        return present and value in values
    if operator == "NotIn":
        return not present or value not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        have, bound = _number(value), _number(values[0])
        if have is None or bound is None:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def _term_holds(term: dict, name: str, labels: dict) -> bool:
    expressions, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term selects nothing
    for req in expressions:
        key = req.get("key")
        if not _requirement_holds(req, labels.get(key), key in labels):
            return False
    for req in fields:
        if req.get("key") != "metadata.name" or not _requirement_holds(req, name, True):
            return False
    return True


def node_matches(selector, name: str, labels: dict) -> bool:
    """Does a v1 NodeSelector (terms ORed, requirements ANDed) select this node?"""
    if not isinstance(selector, dict):
        return False
    return any(_term_holds(t, name, labels) for t in selector.get("nodeSelectorTerms") or [] if isinstance(t, dict))


def tolerates(toleration: dict, taint: dict) -> bool:
    """A toleration matches a taint (core/v1 semantics)."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return not toleration.get("key") or toleration["key"] == taint.get("key")
    return toleration.get("key") == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")
