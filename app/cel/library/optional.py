"""cel-go's optional types: optional.of / ofNonZeroValue / none, hasValue, value, orValue, or;
the syntax (x.?f, x[?k], [?e], {?k: v}) and optMap / optFlatMap are rewritten onto these."""

from __future__ import annotations

from ..values import OPT, is_optional, optional
from .decl import function, method

_O = "optional(A)"
DECLARATIONS = [
    function("optional.of", ("A",), _O), function("optional.ofNonZeroValue", ("A",), _O),
    function("optional.none", (), "optional(dyn)"),
    method("hasValue", _O, (), "bool", engine="optional__hasValue"),
    method("value", _O, (), "A", engine="optional__value"),
    method("orValue", _O, ("A",), "A", engine="optional__orValue"),
    method("or", _O, (_O,), _O, engine="optional__or"),
]


def select(receiver, key):
    """x.?f and x[?k]: the value when present, else none; on an optional, applied inside it."""
    if is_optional(receiver):
        if not receiver[OPT]:
            return receiver
        receiver = receiver[OPT][0]
    if isinstance(receiver, dict):
        return optional(receiver[key]) if key in receiver else optional(present=False)
    if isinstance(receiver, list) and isinstance(key, int):
        return optional(receiver[key]) if 0 <= key < len(receiver) else optional(present=False)
    raise ValueError("optional selection needs a map or a list")


def _value(opt):
    if not is_optional(opt):
        raise ValueError("value() needs an optional")
    if not opt[OPT]:
        raise ValueError("optional.none() dereference")
    return opt[OPT][0]


def _or_value(opt, default):
    if not is_optional(opt):
        raise ValueError("orValue() needs an optional")
    return opt[OPT][0] if opt[OPT] else default


def _non_zero(value) -> dict:
    zero = value in (0, "", False, None) or value == [] or value == {}
    return optional(value, present=not zero)


def _with_entries(base: dict, entries: list) -> dict:
    """{k: v, ?k2: o}: the optional entries whose value is present, added to the plain ones."""
    out = dict(base)
    for key, opt in entries:
        if opt[OPT]:
            out[key] = opt[OPT][0]
    return out


FUNCTIONS = {
    "optional__of": optional, "optional__none": lambda: optional(present=False),
    "optional__ofNonZeroValue": _non_zero, "optional__select": select, "optional__value": _value,
    "optional__hasValue": lambda opt: bool(opt[OPT]), "optional__orValue": _or_value,
    "optional__or": lambda opt, other: opt if opt[OPT] else other, "cel__optional_entries": _with_entries,
}
