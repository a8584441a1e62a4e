"""The checked tree in the form the evaluation engine runs: syntax it lacks (optional selection
and elements, cel.bind, two-variable comprehensions, sortBy, optMap, namespaced functions,
global matches) becomes calls of registered functions and plain macros, and a computed
attribute domain reads an empty map when the device has none (as upstream). Pure."""

from __future__ import annotations

import itertools

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
    rebuilt,
)

_TRANSFORMS = {"transformList": "", "transformMap": "cel__to_map", "transformMapEntry": "cel__merge_entries"}


def for_engine(tree: Node, checked: Checked) -> Node:
    return _Rewriter(checked).node(tree)


def _lit(value) -> Literal:
    return Literal(0, value, "int" if isinstance(value, int) else "string")


def _method(target: Node, name: str, *args: Node) -> Call:
    return Call(target.pos, name, list(args), target)


class _Rewriter:
    def __init__(self, checked: Checked):
        self.checked = checked
        self.counter = itertools.count()

    def node(self, node: Node) -> Node:
        return getattr(self, "_" + type(node).__name__.lower())(node)

    def _literal(self, node):
        return node

    def _ident(self, node):
        return node

    def _select(self, node: Select):
        operand = self.node(node.operand)
        if node.optional:
            return Call(node.pos, "optional__select", [operand, _lit(node.field)])
        return Select(node.pos, operand, node.field, False, node.test)

    def _index(self, node: Index):
        operand, key = self.node(node.operand), self.node(node.key)
        if node.optional:
            return Call(node.pos, "optional__select", [operand, key])
        if (isinstance(operand, Select) and operand.field in ("attributes", "capacity")
                and isinstance(operand.operand, Ident) and operand.operand.name == "device"
                and not (isinstance(key, Literal) and key.kind == "string")):
            # A computed domain the device lacks reads as an empty map, where the engine would raise.
            return Conditional(node.pos, Binary(node.pos, "in", key, operand), Index(node.pos, operand, key),
                               MapLit(node.pos, []))
        return Index(node.pos, operand, key)

    def _call(self, node: Call):
        args = [self.node(a) for a in node.args]
        overloads = self.checked.overloads.get(id(node), ())
        engine = overloads[0].engine if overloads else node.name
        if id(node) in self.checked.qualified:
            return Call(node.pos, engine, args)
        if node.target is None:
            if node.name == "matches" and len(args) == 2:
                return Call(node.pos, "matches", args[1:], args[0])
            return Call(node.pos, engine, args)
        return Call(node.pos, engine, args, self.node(node.target))

    def _listlit(self, node: ListLit):
        elements = [self.node(e) for e in node.elements]
        if not node.optional:
            return ListLit(node.pos, elements)
        pieces: list[Node] = []
        plain: list[Node] = []
        for i, element in enumerate(elements):
            if i not in node.optional:
                plain.append(element)
                continue
            if plain:
                pieces.append(ListLit(node.pos, plain))
                plain = []
            present = _method(element, "optional__hasValue")
            pieces.append(Conditional(node.pos, present, ListLit(node.pos, [_method(element, "optional__value")]),
                                      ListLit(node.pos, [])))
        if plain:
            pieces.append(ListLit(node.pos, plain))
        out: Node = pieces[0]
        for piece in pieces[1:]:
            out = Binary(node.pos, "+", out, piece)
        return out

    def _maplit(self, node: MapLit):
        entries = [(self.node(k), self.node(v), o) for k, v, o in node.entries]
        plain = MapLit(node.pos, [(k, v, False) for k, v, o in entries if not o])
        optional = [ListLit(node.pos, [k, v]) for k, v, o in entries if o]
        if not optional:
            return plain
        return Call(node.pos, "cel__optional_entries", [plain, ListLit(node.pos, optional)])

    def _operator(self, node: Unary | Binary | Conditional):
        return rebuilt(node, self.node)  # operators need no rewrite of their own

    _unary = _binary = _conditional = _operator

    def _macro(self, node: Macro):
        pos = node.pos
        if node.name == "bind":  # cel.bind(v, init, body): init evaluated once, v bound in body
            init, body = (self.node(a) for a in node.args)
            return Index(pos, Macro(pos, "map", ListLit(pos, [init]), node.variables, [body]), _lit(0))
        target = self.node(node.receiver)
        if node.name in ("optMap", "optFlatMap"):
            mapped = Index(pos, Macro(pos, "map", ListLit(pos, [_method(target, "optional__value")]),
                                      node.variables, [self.node(node.args[0])]), _lit(0))
            result = Call(pos, "optional__of", [mapped]) if node.name == "optMap" else mapped
            return Conditional(pos, _method(target, "optional__hasValue"), result, Call(pos, "optional__none", []))
        if node.name == "sortBy":
            (variable,) = node.variables
            keyed = Macro(pos, "map", target, node.variables, [ListLit(pos, [self.node(node.args[0]),
                                                                             Ident(pos, variable)])])
            return _method(keyed, "cel__sort_keyed")
        if len(node.variables) == 1:
            return Macro(pos, node.name, target, node.variables, [self.node(a) for a in node.args])
        pair = f"__p{next(self.counter)}"
        bodies: list[Node] = [_bind_pair(self.node(a), node.variables, pair) for a in node.args]
        pairs: Node = _method(target, "cel__pairs")
        if node.name not in _TRANSFORMS:
            return Macro(pos, node.name, pairs, (pair,), bodies)
        *condition, value = bodies
        if node.name == "transformMap":
            value = ListLit(pos, [Index(pos, Ident(pos, pair), _lit(0)), value])
        source: Node = Macro(pos, "filter", pairs, (pair,), condition) if condition else pairs
        transformed = Macro(pos, "map", source, (pair,), [value])
        return _method(transformed, _TRANSFORMS[node.name]) if _TRANSFORMS[node.name] else transformed


def _bind_pair(node: Node, names: tuple, pair: str) -> Node:
    """The node with the two variables read from the pair (index or key, value); an inner macro
    that binds the same name hides it."""
    if isinstance(node, Ident):
        if node.name in names:
            return Index(node.pos, Ident(node.pos, pair), _lit(names.index(node.name)))
        return node
    if isinstance(node, Macro):
        hidden = tuple("\0" if n in node.variables else n for n in names)
        target = _bind_pair(node.target, names, pair) if node.target is not None else None
        # cel.bind's value is outside its own binding; everything else a macro holds is inside.
        args = [_bind_pair(a, names if node.name == "bind" and k == 0 else hidden, pair)
                for k, a in enumerate(node.args)]
        return Macro(node.pos, node.name, target, node.variables, args)
    return rebuilt(node, lambda child: _bind_pair(child, names, pair))
