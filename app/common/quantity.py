"""Kubernetes resource.Quantity parsing (the subset admission sees), exact via Decimal."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
            "P": Decimal("1e15"), "E": Decimal("1e18")}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)
# Larger than any device count or memory size we could meaningfully request.
_MAX_MAGNITUDE = Decimal("1e30")


def parse_quantity(value: object) -> Decimal:
    """Parse a Quantity (YAML may give int, float or string); ValueError names the problem."""
    if isinstance(value, bool):
        raise ValueError(f"expected a quantity, got boolean {value!r}")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    if not isinstance(value, str):
        raise ValueError(f"expected a quantity, got {type(value).__name__}")
    text = value.strip()
    match = _QUANTITY.match(text)
    if not match or len(text) > 64:
        raise ValueError(f"{value[:64]!r} is not a valid quantity")
    try:
        number = Decimal(match["num"])
        if match["exp"]:
            number = number.scaleb(int(match["exp"][1:]))
        suffix = match["suffix"] or ""
        number *= _BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix]
    except (InvalidOperation, ValueError, OverflowError):
        raise ValueError(f"{value[:64]!r} is not a valid quantity") from None
    if abs(number) > _MAX_MAGNITUDE:
        raise ValueError(f"{value[:64]!r} is out of range")
    return number


def parse_count(value: object) -> int:
    """A device count: a non-negative whole number."""
    number = parse_quantity(value)
    if number < 0:
        raise ValueError(f"{value!r} is negative")
    if number != number.to_integral_value():
        raise ValueError(f"{value!r} is not a whole number of devices")
    return int(number)


def count_or_none(value: object) -> int | None:
    """parse_count, or None where the value is no count (one the API server would not have stored)."""
    try:
        return parse_count(value)
    except (ValueError, ArithmeticError, TypeError):
        return None


def format_mebibytes(number: Decimal) -> str:
    """Render a byte amount as a CEL quantity literal, exact (Mi when whole, else bytes)."""
    mib = number / _BINARY["Mi"]
    if mib == mib.to_integral_value():
        return f"{int(mib)}Mi"
    return str(int(number.to_integral_value()))
