"""CEL's standard declarations (operators, size, string tests, conversions, time); operators'
costs depend on their operand types and live in `cost`. The engine runs them natively,
except bool() from a string, which follows upstream's accepted spellings."""

from __future__ import annotations

from .decl import each, function, method

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
          lambda t: function("string", (t,), "string")),
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


FUNCTIONS = {"bool": _to_bool}
