"""The creation-time cost estimate on the checked tree, by upstream's rules (cel-go's
estimator with the Kubernetes library's and the DRA environment's sizes): identifiers,
selections on maps and objects, indexes and calls cost one, literals nothing; strings cost a
tenth per character compared or walked; creating a list costs 10, a map 30; a comprehension
costs its range, its result and, per element it may iterate, its loop. Operators are costed
here by their operand types; functions by the rule their declaration names. Where no size is known
it is 2^64-1, as upstream, so that an unbounded walk is refused. Pure."""

from __future__ import annotations

import math

from app.common import deadline, vocabulary

from . import types
from .checker import Checked
from .tree import (
    Binary,
    Call,
    Conditional,
    Ident,
    Index,
    ListLit,
    Literal,
    Macro,
    MapLit,
    Node,
    Select,
    Unary,
    chain,
)

UNKNOWN = 2 ** 64 - 1
MAP_ENTRIES = vocabulary.DRA_MAX_ATTRIBUTES_PER_DEVICE  # domains, and names in one
VALUE_SIZE = vocabulary.DRA_MAX_ATTRIBUTE_VALUE_LENGTH  # an attribute value's characters or list elements
DOMAIN_SIZE, NAME_SIZE = vocabulary.DRA_MAX_DOMAIN_LENGTH, vocabulary.DRA_MAX_ID_LENGTH
DRIVER_SIZE = vocabulary.DRA_MAX_DRIVER_NAME_LENGTH
LIST_BASE, MAP_BASE = 10, 30
_SCALARS = frozenset({types.BOOL, types.INT, types.UINT, types.DOUBLE, "duration", "timestamp", types.NULL,
                      # the Kubernetes library's values compare in constant time (upstream accepts
                      # quantity('1') == quantity('1'), which an unknown size would refuse)
                      "Quantity", "Semver", "IP", "CIDR", "URL", "Format"})


def _add(*values: int) -> int:
    return min(sum(values), UNKNOWN)


def _times(a: int, b: int) -> int:
    return min(a * b, UNKNOWN)


def _factor(size: int, factor: float) -> int:
    return min(math.ceil(size * factor), UNKNOWN)


class Estimate:
    __slots__ = ("cost", "size", "key", "value")

    def __init__(self, cost: int, size: int = UNKNOWN, key: int = UNKNOWN, value: int = UNKNOWN):
        self.cost, self.size, self.key, self.value = cost, size, key, value


def estimate(tree: Node, checked: Checked) -> int:
    return _Coster(checked).visit(tree).cost


class _Coster:
    def __init__(self, checked: Checked):
        self.checked = checked
        self.scopes: list[dict] = []
        self.visited = 0

    def visit(self, node: Node) -> Estimate:
        self.visited += 1
        if not self.visited & 1023:
            deadline.check()
        found = getattr(self, "_" + type(node).__name__.lower())(node)
        if found.size == UNKNOWN and self._scalar(self.checked.type_of(node)):
            found.size = 1
        return found

    @staticmethod
    def _scalar(t) -> bool:
        return t in _SCALARS or (types.kind(t) == "optional" and t[1] in _SCALARS)

    def _literal(self, node: Literal):
        return Estimate(0, len(node.value) if node.kind in ("string", "bytes") else 1)

    def _ident(self, node: Ident):
        for scope in reversed(self.scopes):
            if node.name in scope:
                return scope[node.name]
        if node.name == "device":
            return Estimate(1, UNKNOWN)
        return Estimate(1)

    def device_path(self, node) -> list | None:
        """['attributes', '*', '*'] for device.attributes[d].n; None when not under `device`."""
        path = []
        while isinstance(node, (Select, Index)):
            path.append(node.field if isinstance(node, Select) else "*")
            node = node.operand
        if isinstance(node, Ident) and node.name == "device" and not any(node.name in s for s in self.scopes):
            return path[::-1]
        return None

    def device_sizes(self, node) -> Estimate:
        path = self.device_path(node)
        if path is None:
            return Estimate(0)
        if path == ["driver"]:
            return Estimate(0, DRIVER_SIZE)
        if len(path) == 1 and path[0] in ("attributes", "capacity"):
            return Estimate(0, MAP_ENTRIES, DOMAIN_SIZE, MAP_ENTRIES)
        if len(path) == 2:
            return Estimate(0, MAP_ENTRIES, NAME_SIZE, VALUE_SIZE)
        if len(path) == 3:
            return Estimate(0, VALUE_SIZE, 1, VALUE_SIZE)
        return Estimate(0)

    def _select(self, node: Select):
        operand = self.visit(node.operand)
        if node.test:
            return Estimate(_add(operand.cost, 1), 1)
        owner = self.checked.type_of(node.operand)
        if node.optional and types.kind(owner) == "optional":
            owner = owner[1]
        step = 1 if types.kind(owner) in ("map", "Device") or types.is_param(owner) or node.optional else 0
        out = self.device_sizes(node)
        if self.device_path(node) is None and types.kind(owner) == "map":
            out.size = operand.value
        out.cost = _add(operand.cost, step)
        return out

    def _index(self, node: Index):
        operand, key = self.visit(node.operand), self.visit(node.key)
        out = self.device_sizes(node)
        if self.device_path(node) is None:
            out.size = operand.value
        out.cost = _add(operand.cost, key.cost, 1)
        return out

    def _listlit(self, node: ListLit):
        parts = [self.visit(e) for e in node.elements]
        value = max((p.size for p in parts), default=0)
        return Estimate(_add(LIST_BASE, *(p.cost for p in parts)), len(parts), 1, value)

    def _maplit(self, node: MapLit):
        keys = [self.visit(k) for k, _v, _o in node.entries]
        values = [self.visit(v) for _k, v, _o in node.entries]
        return Estimate(_add(MAP_BASE, *(p.cost for p in keys + values)), len(keys),
                        max((k.size for k in keys), default=0), max((v.size for v in values), default=0))

    def _unary(self, node: Unary):
        operand = self.visit(node.operand)
        return Estimate(_add(operand.cost, 1), operand.size)

    def _conditional(self, node: Conditional):
        condition, then, otherwise = (self.visit(n) for n in (node.condition, node.then, node.otherwise))
        return Estimate(_add(condition.cost, max(then.cost, otherwise.cost)), max(then.size, otherwise.size),
                        max(then.key, otherwise.key), max(then.value, otherwise.value))

    def _binary(self, node: Binary):
        if node.op in ("&&", "||"):
            return Estimate(_add(*(self.visit(n).cost for n in chain(node)[0])), 1)
        left, right = self.visit(node.left), self.visit(node.right)
        args = _add(left.cost, right.cost)
        left_type, right_type = self.checked.type_of(node.left), self.checked.type_of(node.right)
        if node.op == "in":
            walks = types.kind(right_type) != "map"
            return Estimate(_add(args, right.size if walks else 1), 1)
        textual = {left_type, right_type} & {types.STRING, types.BYTES}
        if node.op in ("==", "!=") or (node.op in ("<", "<=", ">", ">=") and textual):
            return Estimate(_add(args, _factor(min(left.size, right.size), 0.1)), 1)
        if node.op == "+" and types.kind(left_type) in (types.STRING, types.BYTES, "list"):
            size = _add(left.size, right.size)
            step = 1 if types.kind(left_type) == "list" else _factor(size, 0.1)
            return Estimate(_add(args, step), size, 1, max(left.value, right.value))
        return Estimate(_add(args, 1), 1)

    def _call(self, node: Call):
        member = node.target is not None and id(node) not in self.checked.qualified  # not sets.f(...)
        target = self.visit(node.target) if member and node.target is not None else None
        args = [self.visit(a) for a in node.args]
        spent = _add(target.cost if target else 0, *(a.cost for a in args))
        overloads = self.checked.overloads.get(id(node), ())
        rule = overloads[0].cost if overloads else "call"
        receiver = target if target is not None else (args[0] if args else Estimate(0, 1))
        if rule == "compare_list":  # each element compared; a string's (or bytes') size is not known
            listed = self.checked.type_of(node.target) if node.target is not None else None
            textual = isinstance(listed, tuple) and listed[0] == "list" and listed[1] in (types.STRING, types.BYTES)
            rule = "walk_text_list" if textual else "walk_list"
        if rule == "join" and node.target is not None and types.kind(self.checked.type_of(node.target)) != "list":
            rule = "join_untyped"  # a dyn receiver: upstream knows no element type to size
        if id(node) in self.checked.qualified and node.name == "range" and len(node.args) == 1:
            given = node.args[0]  # lists.range(n): n elements when n is a literal, else unbounded
            size = max(given.value, 0) if isinstance(given, Literal) and given.kind == "int" else UNKNOWN
            return Estimate(_add(spent, size, 1, LIST_BASE), size, 1, 1)
        out = _RULES.get(rule, _call)(receiver, args if target is not None else args[1:])
        out.cost = _add(spent, out.cost)
        return out

    def _macro(self, node: Macro):
        if node.name == "bind":
            init = self.visit(node.args[0])
            self.scopes.append({node.variables[0]: Estimate(1, init.size, init.key, init.value)})
            body = self.visit(node.args[1])
            self.scopes.pop()
            return Estimate(_add(LIST_BASE, init.cost, body.cost), body.size, body.key, body.value)
        target = self.visit(node.receiver)
        if node.name in ("optMap", "optFlatMap"):
            self.scopes.append({node.variables[0]: Estimate(1, target.size)})
            body = self.visit(node.args[0])
            self.scopes.pop()
            extra = 13 if node.name == "optMap" else 12
            return Estimate(_add(2 * target.cost, body.cost, extra), body.size)
        sizes = (Estimate(1, target.key), Estimate(1, target.value))
        two = len(node.variables) == 2
        is_map = types.kind(self.checked.type_of(node.receiver)) == "map"
        if two:
            bound = dict(zip(node.variables, sizes if is_map else (Estimate(1, 1), sizes[1])))
        else:
            bound = {node.variables[0]: sizes[0] if is_map else sizes[1]}
        self.scopes.append(bound)
        bodies = [self.visit(a).cost for a in node.args]
        self.scopes.pop()
        body_cost = _add(*bodies)
        fixed, per = {"all": (1, 3), "exists": (1, 4), "exists_one": (2, 2), "transformMap": (MAP_BASE + 1, 3),
                      "transformMapEntry": (MAP_BASE + 1, 2), "filter": (LIST_BASE + 1, 13)}.get(
                          node.name, (LIST_BASE + 1, 12))
        return Estimate(_add(target.cost, fixed, _times(target.size, _add(per, body_cost))), target.size)


# -- function rules (cost beyond the arguments, and the result's size) --------------------------
def _call(receiver: Estimate, args: list) -> Estimate:
    return Estimate(1)


def _walk(receiver: Estimate, args: list) -> Estimate:
    return Estimate(_factor(receiver.size, 0.1), receiver.size)


def _walk_list(receiver: Estimate, args: list) -> Estimate:
    return Estimate(receiver.size, receiver.size, 1, receiver.value)


def _walk_text_list(receiver: Estimate, args: list) -> Estimate:
    return Estimate(_times(receiver.size, _add(1, _factor(UNKNOWN, 0.1))), receiver.size, 1, receiver.value)


def _includes(receiver: Estimate, args: list) -> Estimate:
    return Estimate(VALUE_SIZE, 1)


def _walk_argument(receiver: Estimate, args: list) -> Estimate:
    return Estimate(_factor(args[0].size, 0.1) if args else 1)


def _contains(receiver: Estimate, args: list) -> Estimate:
    return Estimate(_times(_factor(receiver.size, 0.1), _factor(args[0].size, 0.1)), 1)


def _prefix(receiver: Estimate, args: list) -> Estimate:
    return Estimate(_factor(args[0].size, 0.1), 1)


def _regex(receiver: Estimate, args: list) -> Estimate:
    pattern = args[0].size if args else UNKNOWN
    return Estimate(_times(_factor(_add(receiver.size, 1), 0.1), _factor(pattern, 0.25)), receiver.size, 1,
                    receiver.size)


def _split(receiver: Estimate, args: list) -> Estimate:
    return Estimate(_factor(receiver.size, 0.2), receiver.size, 1, receiver.size)


def _replace(receiver: Estimate, args: list) -> Estimate:
    """The walk and the result it builds: each shortest match replaced by the longest text."""
    old = args[0].size if args else 1
    new = args[1].size if len(args) > 1 else UNKNOWN
    if old == 0:
        size = _add(_times(_add(receiver.size, 1), new), receiver.size)
    elif new <= old:
        size = receiver.size
    else:
        size = _times(math.ceil(receiver.size / old) if receiver.size < UNKNOWN else UNKNOWN, new)
    return Estimate(_factor(receiver.size, 0.2), size)


def _join(receiver: Estimate, args: list) -> Estimate:
    size = _times(receiver.size, UNKNOWN)  # upstream sizes elements by their type: unknown
    if args:
        size = _add(size, _times(args[0].size, max(receiver.size - 1, 0)))
    return Estimate(_factor(size, 0.1), size)


def _join_untyped(receiver: Estimate, args: list) -> Estimate:
    size = _times(args[0].size, max(receiver.size - 1, 0)) if args else 0
    return Estimate(_factor(size, 0.1), size)


def _pairs(receiver: Estimate, args: list) -> Estimate:
    return Estimate(_times(receiver.size, args[0].size if args else 1), 1)


_RULES = {"call": _call, "walk": _walk, "walk_list": _walk_list, "contains": _contains, "prefix": _prefix,
          "regex": _regex, "replace": _replace, "join": _join, "pairs": _pairs, "split": _split,
          "includes": _includes, "walk_argument": _walk_argument, "walk_text_list": _walk_text_list,
          "join_untyped": _join_untyped}
