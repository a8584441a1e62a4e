"""matchAttribute and distinctAttribute as upstream's allocator applies them: which requests a
constraint covers, and attribute values compared by type and value. Pure."""

from __future__ import annotations

from .claims import Request
from .quirks import before


def applies(names, req: Request) -> bool:
    """Does a constraint naming these requests (none: all) cover this request or subrequest?"""
    return not names or req.base in names or req.name in names


class Constraint:
    def __init__(self, raw: dict, release=None):
        self.requests = set(raw.get("requests") or ())
        self.attribute = raw.get("matchAttribute") or raw.get("distinctAttribute")
        self.distinct = not raw.get("matchAttribute")
        # 1.34's allocator compares distinct values by pointer: two devices never count as the same.
        self.pointers = self.distinct and before(release, 35)
        self.values: list = []

    def applies(self, req: Request) -> bool:
        return applies(self.requests, req)

    def add(self, value) -> bool:
        if value is None:
            return False
        if self.distinct:
            if self.values and (_kind(value) == "list" or (
                    not self.pointers and any(_same(value, v) for v in self.values))):
                return False
        elif self.values and not _same(value, self.values[0]):
            return False
        self.values.append(value)
        return True

    def remove(self) -> None:
        self.values.pop()


def _kind(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict) and len(value) == 1:
        return "version"
    return "list"


def _same(a, b) -> bool | None:
    """Equal as upstream compares attributes (type and value, versions by text); None when a
    value is of a type it cannot compare (a list): a duplicate for distinct, a mismatch for match."""
    ka, kb = _kind(a), _kind(b)
    if "list" in (ka, kb):
        return None
    return ka == kb and a == b


def match_key(value) -> tuple | None:
    """What matchAttribute / distinctAttribute compare, as a hashable key; None for lists."""
    kind = _kind(value)
    if kind == "list":
        return None
    return (kind, next(iter(value.values())) if kind == "version" else value)
