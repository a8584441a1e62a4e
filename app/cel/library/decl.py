"""One declaration per overload: how it is called (function or method), its parameter and
result types, the name the evaluation engine runs it under, and its cost rule. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from .. import types


@dataclass(frozen=True)
class Overload:
    name: str  # as written in CEL: "size", "sets.contains", "_+_"
    member: bool  # called as receiver.name(...); the receiver is params[0]
    params: tuple
    result: object
    engine: str  # what the evaluation engine calls (a registered function or a builtin)
    cost: str = "call"  # a rule of cost.RULES
    feature: str | None = None  # declared only when this feature is on


def method(name: str, receiver: str, args: tuple | list, result: str, engine: str | None = None,
           cost: str = "call", feature: str | None = None) -> Overload:
    return Overload(name, True, tuple(types.of(t) for t in (receiver, *args)), types.of(result), engine or name,
                    cost, feature)


def function(name: str, args: tuple | list, result: str, engine: str | None = None, cost: str = "call",
             feature: str | None = None) -> Overload:
    return Overload(name, False, tuple(types.of(t) for t in args), types.of(result),
                    engine or name.replace(".", "__"), cost, feature)


def each(kinds, make) -> list[Overload]:
    """One overload per type: each(("int", "uint"), lambda t: function("-_", (t,), t))."""
    return [make(t) for t in kinds]
