"""Kubernetes' semver library: semver(s[, normalize]), isSemver(s[, normalize]) and the version
methods; compareTo and its relatives compare quantities or versions, whichever they are given."""

from __future__ import annotations

from typing import Any

import re

from ..values import V, tagged
from . import quantity
from .decl import function, method

_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?$")

DECLARATIONS = [
    function("semver", ("string",), "Semver"), function("semver", ("string", "bool"), "Semver"),
    function("isSemver", ("string",), "bool"), function("isSemver", ("string", "bool"), "bool"),
    method("major", "Semver", (), "int"), method("minor", "Semver", (), "int"), method("patch", "Semver", (), "int"),
    method("compareTo", "Semver", ("Semver",), "int"),
    method("isGreaterThan", "Semver", ("Semver",), "bool"), method("isLessThan", "Semver", ("Semver",), "bool"),
]


def semver_value(text: str) -> dict:
    if not isinstance(text, str) or not _SEMVER.match(text):
        raise ValueError(f"{text!r} is not a semantic version")
    return {V: text}


def normalized_semver(text: str) -> str:
    """semver(text, true): a leading v, missing minor or patch and leading zeros are tolerated
    (as the Kubernetes library's tolerant parse does)."""
    if not isinstance(text, str):
        raise ValueError("semver() takes a string")
    text = text.strip()
    text = text[1:] if text.startswith("v") else text
    parts = text.split(".", 2)
    parts = [p.lstrip("0") or "0" if len(p) > 1 and p[0] == "0" and p[1:2].isdigit() else p for p in parts]
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise ValueError(f"{text!r}: a short version cannot carry pre-release or build metadata")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def _parts(value) -> tuple:
    match = _SEMVER.match(value[V])
    if match is None:  # values are made by semver_value, which validates
        raise ValueError(f"not a semantic version: {value[V]!r}")
    major, minor, patch, pre = int(match[1]), int(match[2]), int(match[3]), match[4]
    return (major, minor, patch, 0 if pre else 1, pre or "")  # a pre-release sorts before its release


def _semver(text, normalize=False):
    return semver_value(normalized_semver(text) if normalize else text)


def _is_semver_text(text, normalize=False) -> bool:
    try:
        _semver(text, normalize)
        return True
    except ValueError:
        return False


def compare(a, b) -> int:
    x: Any
    y: Any
    if quantity.is_quantity(a) and quantity.is_quantity(b):
        x, y = quantity.amount(a), quantity.amount(b)
    elif tagged(a, V) and tagged(b, V):
        x, y = _parts(a), _parts(b)
    else:
        raise ValueError("compareTo needs two quantities or two semantic versions")
    return (x > y) - (x < y)


FUNCTIONS = {
    "semver": _semver, "isSemver": _is_semver_text,
    "major": lambda v: _parts(v)[0], "minor": lambda v: _parts(v)[1], "patch": lambda v: _parts(v)[2],
    "compareTo": compare, "isGreaterThan": lambda a, b: compare(a, b) > 0,
    "isLessThan": lambda a, b: compare(a, b) < 0,
}
