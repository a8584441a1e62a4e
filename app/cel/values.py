"""How values the evaluation engine has no type for travel through it: one-key maps
({"_quantity": "1.5"}, {"_semver": "1.2.3"}, {"_optional": [v] or []}, {"_url": ...},
{"_ip": ...}, {"_cidr": ...}, {"_format": name}). Equality then still works. Pure."""

from __future__ import annotations

import threading
from decimal import Decimal

from app.common import vocabulary

Q, V, OPT, URL, IP, CIDR, FORMAT = "_quantity", "_semver", "_optional", "_url", "_ip", "_cidr", "_format"


def tagged(value, tag: str) -> bool:
    return isinstance(value, dict) and tag in value and len(value) <= 2


def quantity_value(amount: Decimal) -> dict:
    text = format(amount.normalize(), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return {Q: text}


def optional(value=None, present: bool = True) -> dict:
    return {OPT: [value] if present else []}


def is_optional(value) -> bool:
    return isinstance(value, dict) and len(value) == 1 and OPT in value


# -- runtime cost of building strings, as upstream counts it ------------------------------------
MAX_COST = vocabulary.DRA_MAX_CEL_COST
MAX_BUILT_STRING = 100_000_000  # characters: past this the process would run out of memory
_local = threading.local()


def reset_charge() -> None:
    _local.spent = 0


def charge(characters: int) -> None:
    """0.1 per character built: past the per-selector limit the evaluation is cancelled before
    the string exists."""
    spent = getattr(_local, "spent", 0) + characters // 10
    _local.spent = spent
    if spent > MAX_COST:
        raise ValueError("operation cancelled: actual cost limit exceeded")


def guard_size(characters: int) -> None:
    """A string this long is refused before it is built."""
    if characters > MAX_BUILT_STRING:
        raise ValueError("operation cancelled: actual cost limit exceeded")
