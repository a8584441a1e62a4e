"""Kubernetes' quantity library: quantity(s), isQuantity(s), sign(q) and the quantity methods."""

from __future__ import annotations

from decimal import Decimal

from app.common import parse_quantity

from ..values import Q, quantity_value, tagged
from .decl import function, method

DECLARATIONS = [
    function("quantity", ("string",), "Quantity"), function("isQuantity", ("string",), "bool"),
    function("sign", ("Quantity",), "int"),
    method("isInteger", "Quantity", (), "bool"), method("asInteger", "Quantity", (), "int"),
    method("asApproximateFloat", "Quantity", (), "double"),
    method("add", "Quantity", ("Quantity",), "Quantity"), method("add", "Quantity", ("int",), "Quantity"),
    method("sub", "Quantity", ("Quantity",), "Quantity"), method("sub", "Quantity", ("int",), "Quantity"),
    method("compareTo", "Quantity", ("Quantity",), "int"),
    method("isGreaterThan", "Quantity", ("Quantity",), "bool"), method("isLessThan", "Quantity", ("Quantity",), "bool"),
]


def amount(value) -> Decimal:
    return Decimal(value[Q])


def is_quantity(value) -> bool:
    return tagged(value, Q)


def _quantity(text):
    if not isinstance(text, str):
        raise ValueError("quantity() takes a string")
    return quantity_value(parse_quantity(text))


def _is_quantity_text(text) -> bool:
    try:
        parse_quantity(text)
        return isinstance(text, str)
    except ValueError:
        return False


def _arith(sign: int):
    def apply(a, b):
        other = amount(b) if is_quantity(b) else Decimal(b)
        return quantity_value(amount(a) + sign * other)
    return apply


def _as_integer(q) -> int:
    value = amount(q)
    if value != value.to_integral_value():
        raise ValueError("quantity is not an integer")
    return int(value)


FUNCTIONS = {
    "quantity": _quantity, "isQuantity": _is_quantity_text,
    "sign": lambda q: (amount(q) > 0) - (amount(q) < 0),
    "isInteger": lambda q: amount(q) == amount(q).to_integral_value(), "asInteger": _as_integer,
    "asApproximateFloat": lambda q: float(amount(q)), "add": _arith(1), "sub": _arith(-1),
}
