"""Type checking of a syntax tree in the DRA CEL environment, as the API server's checker does
at creation time: declared variables and fields, overloads from the library declarations,
homogeneous list and map literals, comprehension ranges, optionals. Pure.

The result annotates every node with its type and every call with the overloads it may run;
the cost estimator and the rewrites read those annotations."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.common import deadline

from . import formatcheck, library, types
from .library import regex
from .library.core import BOOL_TEXT
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
    PositionedError,
    Select,
    Unary,
    chain,
)
from .types import BOOL, DYN, ERROR, INT, STRING, TYPE

TYPE_NAMES = frozenset({"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type", "dyn"})
_MAP_KEYS = frozenset({"int", "uint", "string", "bool", DYN, ERROR})
_OPERATORS = {"==": "_==_", "!=": "_!=_", "<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_", "in": "@in",
              "+": "_+_", "-": "_-_", "*": "_*_", "/": "_/_", "%": "_%_"}
_DOMAIN_MAP = "map(string, map(string, {}))"


def _empty(node: Node) -> bool:
    """An empty list or map literal: its element type is free (cel-go unifies it with the others)."""
    return (isinstance(node, ListLit) and not node.elements) or (isinstance(node, MapLit) and not node.entries)


class CheckError(PositionedError):
    """What the API server's checker refuses, at a position."""


@dataclass(frozen=True)
class Environment:
    variables: dict  # name -> type
    list_attributes: bool = False  # DRAListTypeAttributes: attribute values may be lists
    consumable_capacity: bool = True  # DRAConsumableCapacity: device.allowMultipleAllocations

    def device_fields(self) -> dict:
        fields = {"driver": STRING, "attributes": types.of(_DOMAIN_MAP.format("dyn")),
                  "capacity": types.of(_DOMAIN_MAP.format("Quantity"))}
        if self.consumable_capacity:
            fields["allowMultipleAllocations"] = BOOL
        return fields

    def features(self) -> frozenset:
        return frozenset({"listTypeAttributes"} if self.list_attributes else ())


@dataclass
class Checked:
    types: dict = field(default_factory=dict)  # id(node) -> type
    overloads: dict = field(default_factory=dict)  # id(call node) -> matching Overloads
    qualified: dict = field(default_factory=dict)  # id(call node) -> "sets.contains" (namespaced function)

    def type_of(self, node: Node):
        return self.types.get(id(node), DYN)


def check(tree: Node, env: Environment) -> Checked:
    checker = _Checker(env)
    checker.visit(tree)
    return checker.out


def is_attribute_value(node: Node) -> bool:
    """device.attributes[d].n or device.attributes[d][n]: one attribute's value."""
    inner = node.operand if isinstance(node, (Select, Index)) else None
    return (isinstance(inner, Index) and isinstance(inner.operand, Select) and inner.operand.field == "attributes"
            and isinstance(inner.operand.operand, Ident) and inner.operand.operand.name == "device")


class _Checker:
    def __init__(self, env: Environment):
        self.env = env
        self.scopes: list[dict] = []
        self.out = Checked()
        self.visited = 0
        self.features = env.features()
        self.exempt = 0  # inside format()'s arguments: literals may mix types (upstream exempts them)

    def visit(self, node: Node):
        self.visited += 1
        if not self.visited & 1023:
            deadline.check()
        kind = getattr(self, "_" + type(node).__name__.lower())
        result = kind(node)
        self.out.types[id(node)] = result
        return result

    def fail(self, message: str, node: Node):
        raise CheckError(message, node.pos)

    # -- leaves ---------------------------------------------------------------------------
    def _literal(self, node: Literal):
        return node.kind

    def _ident(self, node: Ident):
        for scope in reversed(self.scopes):
            if node.name in scope:
                return scope[node.name]
        if node.name in self.env.variables:
            return self.env.variables[node.name]
        if node.name in TYPE_NAMES:
            return TYPE
        if self.env.variables.keys() == {"device"}:
            self.fail(f"undeclared reference to {node.name!r} (only 'device' is defined)", node)
        self.fail(f"undeclared reference to {node.name!r} (defined: {', '.join(sorted(self.env.variables))})", node)

    # -- selection --------------------------------------------------------------------------
    def _select(self, node: Select):
        operand = self.visit(node.operand)
        inner = operand[1] if node.optional and types.kind(operand) == "optional" else operand
        value = self.field_type(inner, node.field, node)
        if node.test:
            return BOOL
        return types.optional_of(value) if node.optional else value

    def field_type(self, operand, name: str, node: Node):
        if operand == "Device":
            fields = self.env.device_fields()
            if name not in fields:
                self.fail(f"undefined field '{name}'", node)
            return fields[name]
        if types.kind(operand) == "map":
            if operand[1] not in (STRING, DYN):
                self.fail(f"type '{types.display(operand)}' does not support field selection", node)
            return operand[2]
        if operand in (DYN, ERROR):
            return DYN
        self.fail(f"type '{types.display(operand)}' does not support field selection", node)

    def _index(self, node: Index):
        operand = self.visit(node.operand)
        key = self.visit(node.key)
        inner = operand[1] if node.optional and types.kind(operand) == "optional" else operand
        value = self.resolve("_[_]", False, [inner, key], node)
        return types.optional_of(value) if node.optional else value

    # -- calls ------------------------------------------------------------------------------
    def _call(self, node: Call):
        target = node.target
        name = self.namespaced(target)
        if name is not None:
            qualified = f"{name}.{node.name}"
            if qualified not in library.OVERLOADS:
                self.fail(f"undeclared reference to function {qualified!r}", node)
            self.out.qualified[id(node)] = qualified
            return self.resolve(qualified, False, [self.visit(a) for a in node.args], node)
        if target is None:
            return self.resolve(node.name, False, [self.visit(a) for a in node.args], node)
        receiver = self.visit(target)
        if node.name == "format" and receiver in (STRING, DYN):  # its list of arguments may mix types
            self.exempt += 1
            try:
                args = [self._listlit(a) if isinstance(a, ListLit) else self.visit(a) for a in node.args]
            finally:
                self.exempt -= 1
            self.out.types.update({id(a): t for a, t in zip(node.args, args)})
            problem = formatcheck.problem(target, node.args, self.out.types.get)
            if problem is not None:
                self.fail(*problem)
            return self.resolve(node.name, True, [receiver] + args, node)
        return self.resolve(node.name, True, [receiver] + [self.visit(a) for a in node.args], node)

    def namespaced(self, target) -> str | None:
        """`sets` in sets.contains(...): a namespace, unless a variable has that name."""
        if not isinstance(target, Ident) or target.name not in library.NAMESPACES:
            return None
        if target.name in self.env.variables or any(target.name in s for s in self.scopes):
            return None
        return target.name

    def resolve(self, name: str, member: bool, args: list, node: Node):
        declared = [o for o in library.OVERLOADS.get(name, ()) if o.feature is None or o.feature in self.features]
        if not declared:
            self.fail(f"undeclared reference to function {name!r}", node)
        shaped = [o for o in declared if o.member == member]
        if not shaped:
            form = "a method" if member else "a function"
            other = f"{name}(...)" if member else f"x.{name}(...)"
            self.fail(f"found no matching overload for '{name}' called as {form}: it is "
                      f"{'a function' if member else 'a method'}, {other}", node)
        results, matched = [], []
        for overload in shaped:
            if len(overload.params) != len(args):
                continue
            bound: dict = {}
            if all(types.assignable(p, a, bound) for p, a in zip(overload.params, args)):
                matched.append(overload)
                results.append(types.substitute(overload.result, bound))
        if not matched:
            self.fail(f"found no matching overload for '{name}' applied to '{_signature(member, args)}'", node)
        self.out.overloads[id(node)] = tuple(matched)
        self.constant_checks(name, node)
        first = results[0]
        return first if all(r == first for r in results) else DYN

    def constant_checks(self, name: str, node: Node) -> None:
        """What upstream's checker refuses in constant arguments: bad patterns, bool('yes')."""
        if not isinstance(node, Call):
            return
        args = node.args
        if name in regex.PATTERN_TAKERS:
            pattern = args[0] if node.target is not None else args[1] if len(args) == 2 else None
            if isinstance(pattern, Literal) and pattern.kind == STRING:
                why = regex.constant_error(name, pattern.value)
                if why:
                    self.fail(why, pattern)
        if name == "bool" and node.target is None and len(args) == 1:
            arg = args[0]
            if isinstance(arg, Literal) and arg.kind == STRING and arg.value not in BOOL_TEXT:
                self.fail("type conversion error from 'string' to 'bool'", arg)

    # -- operators --------------------------------------------------------------------------
    def _unary(self, node: Unary):
        return self.resolve("!_" if node.op == "!" else "-_", False, [self.visit(node.operand)], node)

    def _binary(self, node: Binary):
        if node.op in ("&&", "||"):
            operands, links = chain(node)
            self.out.types.update((id(link), BOOL) for link in links)
            for operand in operands:
                found = self.visit(operand)
                if found not in (BOOL, DYN, ERROR):
                    self.fail(f"expected type 'bool' but found '{types.display(found)}'", operand)
            return BOOL
        return self.resolve(_OPERATORS[node.op], False, [self.visit(node.left), self.visit(node.right)], node)

    def _conditional(self, node: Conditional):
        args = [self.visit(node.condition), self.visit(node.then), self.visit(node.otherwise)]
        return self.resolve("_?_:_", False, args, node)

    # -- aggregates ---------------------------------------------------------------------------
    def _listlit(self, node: ListLit):
        element = None
        for i, item in enumerate(node.elements):
            found = self.unwrap(self.visit(item), item) if i in node.optional else self.visit(item)
            if (i in node.optional and found == DYN) or _empty(item):
                continue  # optional.none() fits any element type; [] and {} any list and map
            joined = types.join(element, found)
            if joined is None and not self.exempt:
                self.fail(f"expected type '{types.display(element)}' but found '{types.display(found)}'", item)
            element = DYN if joined is None else joined
        return types.list_of(DYN if element is None else element)

    def _maplit(self, node: MapLit):
        key_type: object = None
        value_type: object = None
        for key, value, optional in node.entries:
            found_key = self.visit(key)
            if found_key not in _MAP_KEYS:
                self.fail(f"unsupported map key type: '{types.display(found_key)}'", key)
            found_value = self.unwrap(self.visit(value), value) if optional else self.visit(value)
            for previous, found, item, slot in ((key_type, found_key, key, 0), (value_type, found_value, value, 1)):
                if slot == 1 and ((optional and found == DYN) or _empty(item)):
                    continue  # optional.none() fits any value type; [] and {} any list and map
                joined = types.join(previous, found)
                if joined is None and not self.exempt:
                    self.fail(f"expected type '{types.display(previous)}' but found '{types.display(found)}'", item)
                joined = DYN if joined is None else joined
                key_type, value_type = (joined, value_type) if slot == 0 else (key_type, joined)
        return types.map_of(key_type or DYN, value_type or DYN)

    def unwrap(self, found, node: Node):
        if types.kind(found) == "optional":
            return found[1]
        if found in (DYN, ERROR):
            return DYN
        self.fail(f"expected type 'optional_type(A)' but found '{types.display(found)}'", node)

    # -- macros -------------------------------------------------------------------------------
    def _macro(self, node: Macro):
        if node.name == "bind":
            value = self.visit(node.args[0])
            return self.scoped({node.variables[0]: value}, node.args[1])
        target = self.visit(node.receiver)
        if node.name in ("optMap", "optFlatMap"):
            return self.optional_macro(node, target)
        variables, element = self.range_variables(node, target)
        bodies = [self.scoped(variables, arg) for arg in node.args]
        predicates = bodies if node.name in ("all", "exists", "exists_one", "filter") else bodies[:-1]
        for arg, found in zip(node.args, predicates):
            if found not in (BOOL, DYN, ERROR):
                self.fail(f"expected type 'bool' but found '{types.display(found)}'", arg)
        result = bodies[-1]
        if node.name in ("all", "exists", "exists_one"):
            return BOOL
        if node.name in ("filter", "sortBy"):
            return types.list_of(element)
        if node.name in ("map", "transformList"):
            return types.list_of(result)
        if node.name == "transformMap":
            return types.map_of(list(variables.values())[0], result)
        if types.kind(result) != "map" and result not in (DYN, ERROR):  # transformMapEntry
            self.fail(f"transformMapEntry: expected a map of one entry but found '{types.display(result)}'",
                      node.args[-1])
        return result if types.kind(result) == "map" else types.map_of(DYN, DYN)

    def range_variables(self, node: Macro, target) -> tuple[dict, object]:
        """The comprehension's variables and their types, and the type of one element."""
        if not self.env.list_attributes and is_attribute_value(node.receiver):
            self.fail(f"compilation failed: {node.name}() over an attribute value: attribute values are not "
                      "lists unless DRAListTypeAttributes is on (off in Kubernetes 1.37)", node)
        kind = types.kind(target)
        if kind == "list":
            one, two = target[1], (INT, target[1])
        elif kind == "map":
            one, two = target[1], (target[1], target[2])
        elif target in (DYN, ERROR):
            one, two = DYN, (DYN, DYN)
        else:
            self.fail(f"expression of type '{types.display(target)}' cannot be the range of a comprehension "
                      "(must be list, map, or dynamic)", node.receiver)
        return dict(zip(node.variables, two if len(node.variables) == 2 else (one,))), one

    def optional_macro(self, node: Macro, target):
        if types.kind(target) != "optional" and target not in (DYN, ERROR):
            self.fail(f"{node.name}: expected an optional but found '{types.display(target)}'", node.receiver)
        inner = target[1] if types.kind(target) == "optional" else DYN
        result = self.scoped({node.variables[0]: inner}, node.args[0])
        if node.name == "optMap":
            return types.optional_of(result)
        return result if types.kind(result) == "optional" else types.optional_of(DYN)

    def scoped(self, variables: dict, node: Node):
        self.scopes.append(variables)
        try:
            return self.visit(node)
        finally:
            self.scopes.pop()


def _signature(member: bool, args: list) -> str:
    shown = [types.display(a) for a in args]
    return f"{shown[0]}.({', '.join(shown[1:])})" if member else f"({', '.join(shown)})"
