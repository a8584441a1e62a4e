"""Kubernetes' regex library (find, findAll) and the RE2 engine every regular expression uses,
as upstream's: linear time whatever the pattern. A constant pattern RE2 refuses is a compile
error (the checker asks `constant_error`)."""

from __future__ import annotations

import re
from functools import lru_cache

import re2

from .decl import method

DECLARATIONS = [
    method("find", "string", ("string",), "string", cost="regex"),
    method("findAll", "string", ("string",), "list(string)", cost="regex"),
    method("findAll", "string", ("string", "int"), "list(string)", cost="regex"),
]
PATTERN_TAKERS = frozenset({"matches", "find", "findAll"})  # the argument that is a pattern

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
_NOT_RE2 = re.compile(r"\(\?[=!<]|\\[1-9]")  # lookarounds and backreferences: not RE2 syntax


@lru_cache(maxsize=256)
def regex(pattern: str):
    """The compiled pattern; re2.error for what RE2 refuses."""
    return re2.compile(pattern, _OPTIONS)


def regex_error(exc: Exception) -> str:
    text = exc.args[0] if exc.args else str(exc)
    return text.decode(errors="replace") if isinstance(text, bytes) else str(text)


def constant_error(name: str, pattern: str) -> str | None:
    """Why upstream refuses this constant pattern at compile time, or None."""
    try:
        regex(pattern)
    except re2.error as exc:
        return f"invalid {name} argument: {regex_error(exc)}"
    if _NOT_RE2.search(pattern):
        return f"invalid {name} argument: lookarounds and backreferences are not RE2 syntax"
    return None


def _compiled(pattern):
    try:
        return regex(pattern)
    except re2.error as exc:
        raise ValueError(f"invalid regular expression: {regex_error(exc)}") from exc


def _find(s, pattern):
    match = _compiled(pattern).search(s)
    return match.group(0) if match else ""


def _find_all(s, pattern, *n):
    limit = n[0] if n and n[0] >= 0 else None
    found = []
    for m in _compiled(pattern).finditer(s):
        if limit is not None and len(found) >= limit:
            break
        found.append(m.group(0))
    return found


FUNCTIONS = {"find": _find, "findAll": _find_all}
