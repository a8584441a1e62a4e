"""Runtime type guards for the functions the evaluation engine calls in Python: an argument the
checker let through as dyn (a device attribute: a string, a version, a bool) that fits no
declared overload is "no such overload", as cel-go's own guards say, never a guess. Pure."""

from __future__ import annotations

import datetime
from collections import defaultdict

from .. import types
from ..values import CIDR, FORMAT, IP, OPT, Q, URL, V, tagged

_TAGS = {"Quantity": Q, "Semver": V, "URL": URL, "IP": IP, "CIDR": CIDR, "Format": FORMAT}
_PLAIN = {"string": str, "double": float, "bytes": bytes, "timestamp": datetime.datetime,
          "duration": datetime.timedelta}


def fits(declared, value) -> bool:
    """Whether a runtime value can be an argument of the declared type (lists and maps: shallow)."""
    kind = types.kind(declared)
    if kind in (types.DYN, "A", "B") or types.is_param(declared):
        return True
    if kind in ("int", "uint"):
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    if kind in _PLAIN:
        return isinstance(value, _PLAIN[kind])
    if kind == "list":
        return isinstance(value, list)
    if kind in _TAGS:
        return tagged(value, _TAGS[kind])
    if kind == "optional":
        return tagged(value, OPT)
    if kind == "map":
        return isinstance(value, dict) and not any(tagged(value, t) for t in (*_TAGS.values(), OPT))
    return True  # a type this guard does not know: the function itself decides


def guarded(functions: dict, overloads: dict) -> dict:
    """Each function wrapped so that arguments no overload of its engine name takes raise."""
    shapes: dict[str, set] = defaultdict(set)
    for found in overloads.values():
        for overload in found:
            shapes[overload.engine].add((overload.name, overload.params))
    out = {}
    for engine, function in functions.items():
        declared = shapes.get(engine)
        out[engine] = _guard(engine, function, tuple(declared)) if declared else function
    return out


def _guard(engine: str, function, declared: tuple):
    def call(*args):
        if not any(len(params) == len(args) and all(map(fits, params, args)) for _name, params in declared):
            name = declared[0][0]
            raise ValueError(f"no such overload: {name}({', '.join(_type_name(a) for a in args)})")
        return function(*args)
    call.__name__ = engine
    return call


def opaque_type(value) -> str | None:
    """The CEL type name of a value the engine carries as a one-key map (values.py), else None."""
    if tagged(value, OPT):
        return "optional_type"
    return next((types.display(name) for name, tag in _TAGS.items() if tagged(value, tag)), None)


def _type_name(value) -> str:
    found = opaque_type(value)
    if found:
        return found
    return {bool: "bool", int: "int", float: "double", str: "string", bytes: "bytes", list: "list",
            dict: "map"}.get(type(value), type(value).__name__)
