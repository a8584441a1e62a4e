"""Builders for the CEL selector expressions we generate (DRA `device` variable)."""

from __future__ import annotations

from collections.abc import Iterable

from app.cel import string_literal


def literal(value: str) -> str:
    """A CEL single-quoted string literal, by the CEL package's one writer."""
    return string_literal(value, "'")


def string_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(literal(v) for v in values) + "]"


def attribute(domain: str, name: str) -> str:
    return f"device.attributes[{literal(domain)}].{name}"


def capacity(domain: str, name: str) -> str:
    return f"device.capacity[{literal(domain)}].{name}"


def has_attribute(domain: str, name: str) -> str:
    # Guard first: a missing attribute is a runtime error that fails the whole allocation.
    return f"{literal(name)} in device.attributes[{literal(domain)}]"


def has_capacity(domain: str, name: str) -> str:
    return f"{literal(name)} in device.capacity[{literal(domain)}]"


def guarded_attribute(domain: str, name: str, test: str) -> str:
    return f"{has_attribute(domain, name)} && {test}"


def guarded_capacity(domain: str, name: str, test: str) -> str:
    return f"{has_capacity(domain, name)} && {test}"


def memory_at_least(domain: str, quantity_literal: str) -> str:
    test = f"{capacity(domain, 'memory')}.compareTo(quantity({literal(quantity_literal)})) >= 0"
    return guarded_capacity(domain, "memory", test)


def any_of(parts: list[str]) -> str:
    if len(parts) == 1:
        return parts[0]
    return " || ".join(f"({p})" for p in parts)


def all_of(parts: list[str]) -> str:
    if len(parts) == 1:
        return parts[0]
    return " && ".join(f"({p})" for p in parts)
