"""CEL source to syntax tree: cel-go's grammar, macros expanded into `Macro` nodes. Pure."""

from __future__ import annotations

import sys
from typing import Any

from .lexer import MAX_INT, RESERVED, SyntaxFault, Token, tokens
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
    Select,
    Unary,
)

MAX_DEPTH = 250  # cel-go's default recursion limit per grammar rule
# Python frames per level of nesting, and left-nested operator chains, in this parser and the
# passes that walk its tree (3.11 keeps such recursion off the C stack).
RECURSION_NEEDED = 20_000
if sys.getrecursionlimit() < RECURSION_NEEDED:  # once, at import: not while a caller measures it
    sys.setrecursionlimit(RECURSION_NEEDED)
_PRECEDENCE = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3, "in": 3,
               "+": 4, "-": 4, "*": 5, "/": 5, "%": 5}
# name -> accepted argument counts, and how many leading arguments name variables
_MEMBER_MACROS = {"all": {2: 1, 3: 2}, "exists": {2: 1, 3: 2}, "exists_one": {2: 1, 3: 2},
                  "map": {2: 1, 3: 1}, "filter": {2: 1}, "transformList": {3: 2, 4: 2}, "transformMap": {3: 2, 4: 2},
                  "transformMapEntry": {3: 2, 4: 2}, "sortBy": {2: 1}, "optMap": {2: 1}, "optFlatMap": {2: 1},
                  "existsOne": {3: 2}}
# cel-go's two-variable comprehensions spell exists_one `existsOne` too (three arguments only).
_MACRO_ALIASES = {"existsOne": "exists_one"}


def parse(text: str):
    """The tree of `text`; SyntaxFault names what is wrong and where."""
    return _Parser(tokens(text)).whole()


class _Parser:
    def __init__(self, toks: list[Token]):
        self.toks = toks
        self.at = 0
        self.depth = 0

    def peek(self, offset: int = 0) -> Token:
        return self.toks[min(self.at + offset, len(self.toks) - 1)]

    def is_punct(self, text: str, offset: int = 0) -> bool:
        tok = self.peek(offset)
        return tok.kind == "punct" and tok.text == text

    def take(self) -> Token:
        tok = self.toks[self.at]
        self.at += 1
        return tok

    def expect(self, text: str) -> Token:
        if not self.is_punct(text):
            tok = self.peek()
            raise SyntaxFault(f"mismatched input '{tok.text or '<EOF>'}' expecting '{text}'", tok.pos)
        return self.take()

    def enter(self, pos: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise SyntaxFault(f"expression recursion limit exceeded: {MAX_DEPTH}", pos)

    def whole(self):
        node = self.expr()
        tok = self.peek()
        if tok.kind != "eof":
            raise SyntaxFault(f"extraneous input '{tok.text}'", tok.pos)
        return node

    def expr(self):
        self.enter(self.peek().pos)
        condition = self.binary(1)
        if self.is_punct("?"):
            pos = self.take().pos
            then = self.binary(1)
            self.expect(":")
            node = Conditional(pos, condition, then, self.expr())
        else:
            node = condition
        self.depth -= 1
        return node

    def operator(self) -> str | None:
        tok = self.peek()
        if tok.kind == "punct" and tok.text in _PRECEDENCE:
            return tok.text
        return "in" if tok.kind == "ident" and tok.text == "in" else None

    def binary(self, level: int):
        left = self.unary() if level > 5 else self.binary(level + 1)
        entered = 0
        while (op := self.operator()) is not None and _PRECEDENCE[op] == level:
            pos = self.take().pos
            if level >= 3:  # left-recursive rules nest one level per operator
                self.enter(pos)
                entered += 1
            right = self.unary() if level >= 5 else self.binary(level + 1)
            left = Binary(pos, op, left, right)
        self.depth -= entered
        return left

    def unary(self):
        tok = self.peek()
        if tok.kind == "punct" and tok.text in "!-" and len(tok.text) == 1:
            ops = []
            while self.peek().kind == "punct" and self.peek().text == tok.text:
                ops.append(self.take())
            if tok.text == "-" and self.peek().kind in ("int", "double") and not self.member_follows(1):
                ops.pop()  # the last minus is the literal's sign
                operand = self.member(self.literal(negative=True))
            else:
                operand = self.member(self.primary())
            return Unary(tok.pos, tok.text, operand) if len(ops) % 2 else operand
        return self.member(self.primary())

    def member_follows(self, offset: int) -> bool:
        """A '.' or '[' after the literal: `-1.foo()` negates the call's result."""
        return self.is_punct(".", offset) or self.is_punct("[", offset)

    def member(self, node):
        while True:
            if self.is_punct("."):
                pos = self.take().pos
                optional = self.is_punct("?")
                if optional:
                    self.take()
                name = self.identifier()
                if self.is_punct("(") and not optional:
                    self.take()
                    node = self.call(pos, name, self.arguments(), node)
                else:
                    node = Select(pos, node, name, optional)
            elif self.is_punct("["):
                pos = self.take().pos
                optional = self.is_punct("?")
                if optional:
                    self.take()
                key = self.expr()
                self.expect("]")
                node = Index(pos, node, key, optional)
            else:
                return node

    def identifier(self) -> str:
        tok = self.take()
        if tok.kind != "ident":
            raise SyntaxFault(f"mismatched input '{tok.text or '<EOF>'}' expecting IDENTIFIER", tok.pos)
        if tok.text in RESERVED or tok.text in ("true", "false", "null", "in"):
            raise SyntaxFault(f"reserved identifier: {tok.text}", tok.pos)
        return tok.text

    def arguments(self) -> list:
        args = []
        if not self.is_punct(")"):
            args.append(self.expr())
            while self.is_punct(","):
                self.take()
                args.append(self.expr())
        self.expect(")")
        return args

    def primary(self):
        tok = self.peek()
        if tok.kind in ("int", "uint", "double", "string", "bytes"):
            return self.literal()
        if tok.kind == "ident" and tok.text in ("true", "false", "null"):
            self.take()
            return Literal(tok.pos, None, "null_type") if tok.text == "null" else Literal(tok.pos, tok.text == "true",
                                                                                             "bool")
        if tok.kind == "punct" and tok.text == ".":
            self.take()  # a leading dot: the name from the root scope
            tok = self.peek()
        if tok.kind == "ident":
            name = self.identifier()
            if self.is_punct("("):
                self.take()
                return self.call(tok.pos, name, self.arguments(), None)
            if self.is_punct("{"):
                raise SyntaxFault(f"undeclared reference to type '{name}': no message types", tok.pos)
            return Ident(tok.pos, name)
        if tok.kind == "punct" and tok.text == "(":
            self.take()
            node = self.expr()
            self.expect(")")
            return node
        if tok.kind == "punct" and tok.text == "[":
            self.take()
            elements, optional = [], set()
            while not self.is_punct("]"):
                if self.is_punct("?"):
                    self.take()
                    optional.add(len(elements))
                elements.append(self.expr())
                if not self.is_punct(","):
                    break
                self.take()
            self.expect("]")
            return ListLit(tok.pos, elements, frozenset(optional))
        if tok.kind == "punct" and tok.text == "{":
            self.take()
            entries = []
            while not self.is_punct("}"):
                optional = self.is_punct("?")
                if optional:
                    self.take()
                key = self.expr()
                self.expect(":")
                entries.append((key, self.expr(), optional))
                if not self.is_punct(","):
                    break
                self.take()
            self.expect("}")
            return MapLit(tok.pos, entries)
        raise SyntaxFault(f"mismatched input '{tok.text or '<EOF>'}'", tok.pos)

    def literal(self, negative: bool = False):
        tok = self.take()
        value: Any = tok.value
        if tok.kind == "int":
            value = -value if negative else value
            if not -MAX_INT - 1 <= value <= MAX_INT:
                raise SyntaxFault(f"invalid int literal: {tok.text}", tok.pos)
        elif tok.kind == "double" and negative:
            value = -value
        return Literal(tok.pos, value, tok.kind)

    def call(self, pos: int, name: str, args: list, target):
        if target is None and name == "has" and len(args) == 1:
            arg = args[0]
            if not isinstance(arg, Select) or arg.optional:
                raise SyntaxFault("invalid argument to has() macro", pos)
            arg.test = True
            return arg
        if isinstance(target, Ident) and target.name == "cel" and name == "bind" and len(args) == 3:
            return Macro(pos, "bind", None, (self.variable(args[0]),), args[1:])
        shape = _MEMBER_MACROS.get(name, {}).get(len(args)) if target is not None else None
        if shape:
            names = tuple(self.variable(a) for a in args[:shape])
            if len(set(names)) != len(names):
                raise SyntaxFault(f"{name}: duplicate variable name '{names[0]}'", pos)
            return Macro(pos, _MACRO_ALIASES.get(name, name), target, names, args[shape:])
        return Call(pos, name, args, target)

    def variable(self, arg) -> str:
        if not isinstance(arg, Ident):
            raise SyntaxFault("argument must be a simple name", arg.pos)
        return arg.name
