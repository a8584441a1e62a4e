"""CEL types as the checker sees them: names for scalars and opaque types, tuples for
parameterised ones (("list", T), ("map", K, V), ("optional", T)); single capital letters are
type parameters of a declaration. Pure."""

from __future__ import annotations

from functools import lru_cache

DYN, ERROR, BOOL, INT, UINT, DOUBLE, STRING, BYTES, NULL = (
    "dyn", "error", "bool", "int", "uint", "double", "string", "bytes", "null_type")
TYPE = "type"
NUMBERS = (INT, UINT, DOUBLE)
# How a type is named in upstream's messages.
_DISPLAY = {"Quantity": "kubernetes.Quantity", "Semver": "kubernetes.Semver", "URL": "kubernetes.URL",
            "IP": "net.IP", "CIDR": "net.CIDR", "Format": "kubernetes.NamedFormat", "Device": "dra.Device",
            "duration": "google.protobuf.Duration", "timestamp": "google.protobuf.Timestamp"}


@lru_cache(maxsize=None)
def of(text: str):
    """'list(map(string, A))' -> ("list", ("map", "string", "A"))."""
    text = text.strip()
    if "(" not in text:
        return text
    head, _, rest = text.partition("(")
    inner = rest[:-1]
    parts, depth, start = [], 0, 0
    for i, c in enumerate(inner):
        depth += c == "("
        depth -= c == ")"
        if c == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    return (head.strip(), *(of(p) for p in parts))


def list_of(element):
    return ("list", element)


def map_of(key, value):
    return ("map", key, value)


def optional_of(value):
    return ("optional", value)


def is_param(t) -> bool:
    return isinstance(t, str) and len(t) == 1 and t.isupper()


def kind(t) -> str:
    return t[0] if isinstance(t, tuple) else t


def display(t) -> str:
    if isinstance(t, tuple):
        head = "optional_type" if t[0] == "optional" else t[0]
        return f"{head}({', '.join(display(p) for p in t[1:])})"
    return _DISPLAY.get(t, t)


def substitute(t, bound: dict):
    if is_param(t):
        return substitute(bound[t], bound) if t in bound else DYN
    if isinstance(t, tuple):
        return (t[0], *(substitute(p, bound) for p in t[1:]))
    return t


def assignable(param, arg, bound: dict) -> bool:
    """Can a value of type `arg` be passed where `param` is declared? Binds type parameters."""
    if arg in (DYN, ERROR) or param == DYN:
        if arg == DYN and is_param(param):
            bound[param] = DYN  # as cel-go: a parameter seen as dyn stays dyn (x ? dyn : map is dyn)
        return True
    if is_param(param):
        if param in bound:
            previous = bound[param]
            if previous == DYN or assignable(previous, arg, bound):
                if previous != arg and not _contains_dyn(arg):
                    bound[param] = most_general(previous, arg)
                return True
            return is_param(previous) is False and assignable(arg, previous, {})
        bound[param] = arg
        return True
    if isinstance(param, tuple) or isinstance(arg, tuple):
        if not (isinstance(param, tuple) and isinstance(arg, tuple)) or param[0] != arg[0] or len(param) != len(arg):
            return False
        return all(assignable(p, a, bound) for p, a in zip(param[1:], arg[1:]))
    return param == arg


def _contains_dyn(t) -> bool:
    return t == DYN or (isinstance(t, tuple) and any(_contains_dyn(p) for p in t[1:]))


def most_general(a, b):
    """Of two mutually assignable types, the one with dyn where they differ."""
    if a == b:
        return a
    if a in (DYN, ERROR) or b in (DYN, ERROR):
        return DYN
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] and len(a) == len(b):
        return (a[0], *(most_general(x, y) for x, y in zip(a[1:], b[1:])))
    return DYN


def join(previous, current):
    """The element type of an aggregate literal after one more element; None when they differ:
    the API server validates literals as homogeneous (a dyn beside an int differs too)."""
    if previous is None or previous == current or ERROR in (previous, current):
        return current if previous is None or previous == current else DYN
    return None
