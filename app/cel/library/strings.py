"""cel-go's strings extension as the API server declares it (version 2: no string reverse),
with format() and strings.quote()."""

from __future__ import annotations

import re

from ..values import charge, guard_size
from .decl import function, method
from .guards import opaque_type

_S = "string"
DECLARATIONS = [
    method("charAt", _S, ("int",), _S, cost="walk"),
    method("indexOf", _S, (_S,), "int", cost="walk"), method("indexOf", _S, (_S, "int"), "int", cost="walk"),
    method("lastIndexOf", _S, (_S,), "int", cost="walk"), method("lastIndexOf", _S, (_S, "int"), "int", cost="walk"),
    method("lowerAscii", _S, (), _S, cost="walk"), method("upperAscii", _S, (), _S, cost="walk"),
    method("replace", _S, (_S, _S), _S, cost="replace"), method("replace", _S, (_S, _S, "int"), _S, cost="replace"),
    method("split", _S, (_S,), "list(string)", cost="split"),
    method("split", _S, (_S, "int"), "list(string)", cost="split"),
    method("substring", _S, ("int",), _S, cost="walk"), method("substring", _S, ("int", "int"), _S, cost="walk"),
    method("trim", _S, (), _S, cost="walk"),
    method("join", "list(string)", (), _S, cost="join"), method("join", "list(string)", (_S,), _S, cost="join"),
    method("format", _S, ("list(dyn)",), _S, cost="walk"),
    function("strings.quote", (_S,), _S, cost="walk"),
]


def _replace(s, old, new, *n):
    charge(len(s))  # upstream charges the receiver it walks
    times = s.count(old) if not n or n[0] < 0 else min(n[0], s.count(old))
    guard_size(len(s) + times * (len(new) - len(old)))
    return s.replace(old, new, n[0]) if n and n[0] >= 0 else s.replace(old, new)


def _split(s, sep, *n):
    if n and n[0] == 0:
        return []
    return s.split(sep, n[0] - 1) if n and n[0] > 0 else s.split(sep)


def _substring(s, start, *end):
    stop = end[0] if end else len(s)
    if not 0 <= start <= stop <= len(s):
        raise ValueError(f"substring({start}, {stop}) out of range")
    return s[start:stop]


def _char_at(s, i):
    if not 0 <= i <= len(s):
        raise ValueError(f"charAt({i}) out of range")
    return s[i:i + 1]


def _join(items, *sep):
    separator = sep[0] if sep else ""
    charge(sum(len(i) for i in items if isinstance(i, str)) + len(separator) * len(items))
    return separator.join(items)


def _index_of(receiver, item, *start):
    if isinstance(receiver, str):
        if not start:
            return receiver.find(item)
        off = _offset(start[0])
        if item == "":
            return min(off, len(receiver))
        return -1 if off >= len(receiver) else receiver.find(item, off)
    return receiver.index(item) if item in receiver else -1


def _last_index_of(receiver, item, *offset):
    if isinstance(receiver, str):
        if not offset:
            return receiver.rfind(item)
        off = _offset(offset[0])
        if item == "":
            return min(off, len(receiver))
        if off >= len(receiver):  # as cel-go: an offset past the end finds nothing
            return -1
        return receiver.rfind(item, 0, min(off, len(receiver) - len(item)) + len(item))
    if not isinstance(receiver, list):
        raise ValueError("lastIndexOf() needs a string or a list")
    return len(receiver) - 1 - receiver[::-1].index(item) if item in receiver else -1


def _offset(value: int) -> int:
    if value < 0:
        raise ValueError(f"index out of range: {value}")
    return value


def _format(template: str, args: list) -> str:
    """cel-go's strings.format: %s %d %f %e %x %X %o %b %%, each taking the next argument."""
    out, i, n = [], 0, 0
    while i < len(template):
        c = template[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        spec = re.match(r"%(\.\d+)?([sdfeExXob%])", template[i:])
        if not spec:
            raise ValueError(f"format: bad verb at {i}")
        i += spec.end()
        verb, precision = spec[2], spec[1]
        charge(int(precision[1:]) if precision else 0)
        if verb == "%":
            out.append("%")
            continue
        if n >= len(args):
            raise ValueError("format: too few arguments")
        arg, n = args[n], n + 1
        if verb == "s":
            out.append(_text(arg))
        elif verb == "d":
            out.append(str(int(arg)))
        elif verb in "fe" or verb == "E":
            digits = int(precision[1:]) if precision else 6
            out.append(format(float(arg), f".{digits}{verb}"))
        else:
            out.append(format(int(arg) if not isinstance(arg, str) else int(arg.encode().hex(), 16),
                              {"x": "x", "X": "X", "o": "o", "b": "b"}[verb]))
        charge(len(out[-1]))
    return "".join(out)


_STRING_CLAUSE = ("error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles, "
                  "maps, lists, types, durations, and timestamps, was given {}")


def _text(value) -> str:
    """%s of one argument, as cel-go's (version 2) string clause writes it."""
    found = opaque_type(value)
    if found:
        raise ValueError(_STRING_CLAUSE.format(found))
    if isinstance(value, list):
        return "[" + ", ".join(_member(v) for v in value) + "]"
    if isinstance(value, dict):
        return _map_text(value)
    return _plain(value)


def _plain(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return shortest(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _member(value) -> str:
    """An element of a list or a map's value: each type's own clause, quoted as a CEL literal."""
    found = opaque_type(value)
    if found:
        raise ValueError(f"error during formatting: no formatting function for {found}")
    if isinstance(value, list):
        return _text(value)
    if isinstance(value, dict):
        return _map_text(value)
    if isinstance(value, float):
        text = f"{value:.6f}"
        return f'"{text}"' if value != value or value in (float("inf"), float("-inf")) else text
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, bytes):
        return "b" + _quote(value.decode("utf-8", "replace"))
    return _plain(value)


def _map_text(value: dict) -> str:
    pairs = []
    for key, item in value.items():
        if isinstance(key, bool) or isinstance(key, int):
            shown = _plain(key)
        elif isinstance(key, str):
            shown = _quote(key)
        else:
            raise ValueError(f"error during formatting: no formatting function for map key of type "
                             f"{type(key).__name__}")
        pairs.append((shown, _member(item)))
    return "{" + ", ".join(f"{k}:{v}" for k, v in sorted(pairs)) + "}"


def shortest(value: float) -> str:
    """CEL's string(double): Go's shortest 'g' form (an exponent below 1e-4 and from 1e6 on)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    digits = repr(abs(value))
    mantissa, _, exponent = digits.partition("e")
    whole, _, fraction = mantissa.partition(".")
    significant = (whole + fraction).lstrip("0") or "0"
    exp = int(exponent or 0) + (len(whole.lstrip("0")) - 1 if whole.strip("0") else
                                -(len(fraction) - len(fraction.lstrip("0"))) - 1)
    significant = significant.rstrip("0") or "0"
    sign = "-" if value < 0 or (value == 0 and str(value).startswith("-")) else ""
    if exp < -4 or exp >= 6:
        rest = significant[1:]
        return f"{sign}{significant[0]}{'.' + rest if rest else ''}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    text = format(abs(value), "f") if exp >= 0 else f"{abs(value):.{len(significant) - exp - 1}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return sign + text


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


FUNCTIONS = {
    "lowerAscii": lambda s: "".join(c.lower() if c.isascii() else c for c in s),
    "upperAscii": lambda s: "".join(c.upper() if c.isascii() else c for c in s),
    "trim": lambda s: s.strip(), "replace": _replace, "split": _split, "substring": _substring,
    "charAt": _char_at, "indexOf": _index_of, "lastIndexOf": _last_index_of, "join": _join,
    "format": _format, "strings__quote": _quote,
}
