"""CEL's standard declarations (operators, size, string tests, conversions, time); operators'
costs depend on their operand types and live in `cost`. The engine runs them natively, except
bool() from a string (upstream's accepted spellings), string() (Go's text for doubles and
durations; bools) and timestamp(), which it lacks."""

from __future__ import annotations

import datetime
import re
from decimal import Decimal

from .decl import each, function, method
from .strings import shortest  # Go's float text, one place

_ORDERED = ("int", "uint", "double", "string", "bytes", "bool", "timestamp", "duration")
_NUMBERS = ("int", "uint", "double")
_SIZED = ("string", "bytes", "list(A)", "map(A, B)")
BOOL_TEXT = {"1": True, "t": True, "T": True, "true": True, "TRUE": True, "True": True,
             "0": False, "f": False, "F": False, "false": False, "FALSE": False, "False": False}


def _sized_add(t):
    return function("_+_", (t, t), t)


DECLARATIONS = [
    *each(_NUMBERS + ("string", "bytes", "list(A)"), _sized_add),
    function("_+_", ("timestamp", "duration"), "timestamp"), function("_+_", ("duration", "timestamp"), "timestamp"),
    function("_+_", ("duration", "duration"), "duration"),
    *each(_NUMBERS, lambda t: function("_-_", (t, t), t)),
    function("_-_", ("timestamp", "timestamp"), "duration"), function("_-_", ("timestamp", "duration"), "timestamp"),
    function("_-_", ("duration", "duration"), "duration"),
    *each(_NUMBERS, lambda t: function("_*_", (t, t), t)), *each(_NUMBERS, lambda t: function("_/_", (t, t), t)),
    *each(("int", "uint"), lambda t: function("_%_", (t, t), t)),
    *each(("int", "double"), lambda t: function("-_", (t,), t)),
    function("!_", ("bool",), "bool"),
    *[function(op, (t, t), "bool") for op in ("_<_", "_<=_", "_>_", "_>=_") for t in _ORDERED],
    *[function(op, (a, b), "bool") for op in ("_<_", "_<=_", "_>_", "_>=_") for a in _NUMBERS for b in _NUMBERS
      if a != b],
    function("_==_", ("A", "A"), "bool"), function("_!=_", ("A", "A"), "bool"),
    function("@in", ("A", "list(A)"), "bool"), function("@in", ("A", "map(A, B)"), "bool"),
    function("_[_]", ("list(A)", "int"), "A"), function("_[_]", ("map(A, B)", "A"), "B"),
    function("_?_:_", ("bool", "A", "A"), "A"),
    *each(_SIZED, lambda t: function("size", (t,), "int")), *each(_SIZED, lambda t: method("size", t, (), "int")),
    method("contains", "string", ("string",), "bool", cost="contains"),
    method("startsWith", "string", ("string",), "bool", cost="prefix"),
    method("endsWith", "string", ("string",), "bool", cost="prefix"),
    method("matches", "string", ("string",), "bool", cost="regex"),
    function("matches", ("string", "string"), "bool", engine="matches", cost="regex"),
    *each(("int", "uint", "double", "string", "timestamp"), lambda t: function("int", (t,), "int")),
    *each(("int", "uint", "double", "string"), lambda t: function("uint", (t,), "uint")),
    *each(("int", "uint", "double", "string"), lambda t: function("double", (t,), "double")),
    *each(("int", "uint", "double", "bool", "string", "bytes", "timestamp", "duration"),
          lambda t: function("string", (t,), "string", engine="cel_string")),
    *each(("bytes", "string"), lambda t: function("bytes", (t,), "bytes")),
    *each(("bool", "string"), lambda t: function("bool", (t,), "bool")),
    function("dyn", ("A",), "dyn"), function("type", ("A",), "type"),
    *each(("string", "duration"), lambda t: function("duration", (t,), "duration")),
    *each(("string", "int", "timestamp"), lambda t: function("timestamp", (t,), "timestamp")),
]


def _to_bool(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in BOOL_TEXT:
        return BOOL_TEXT[value]
    raise ValueError(f"type conversion error from '{type(value).__name__}' to 'bool'")


def to_string(value) -> str:
    """string(): what the engine lacks (bools, timestamps) or writes otherwise (doubles, durations)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return shortest(value)
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("invalid UTF-8 in bytes, cannot convert to string") from None
    if isinstance(value, datetime.timedelta):  # seconds, never an exponent: "3600s", "1.5s"
        text = format(Decimal(repr(value.total_seconds())), "f")
        return (text.rstrip("0").rstrip(".") if "." in text else text) + "s"
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.timezone.utc).isoformat().replace("+00:00", "Z")
    return str(value)


def to_timestamp(value):
    """timestamp(): seconds since the epoch, or RFC 3339 text."""
    if isinstance(value, datetime.datetime):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return datetime.datetime.fromtimestamp(value, datetime.timezone.utc)
    if isinstance(value, str) and re.match(r"\d{4}-\d{2}-\d{2}T", value):
        try:
            return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
    raise ValueError(f"type conversion error from '{type(value).__name__}' to 'timestamp'")


FUNCTIONS = {"bool": _to_bool, "cel_string": to_string, "timestamp": to_timestamp}
