"""Compile-time errors of upstream's CEL type checker that the text shows. Pure.

Our engine checks no types before it runs, so without these an expression upstream refuses at
creation would only fail on the devices that reach it (or never). Each check reads declarations
of the API server's CEL environment (Kubernetes 1.37, apiserver/pkg/cel/environment/base.go and
the libraries it lists): which functions are called as functions and which as methods, what the
conversions accept, which fields `device` has, and the types literals and known fields have.
"""

from __future__ import annotations

import re

from .celscan import scan

# Functions the environment declares only as global functions (f(x)), or only as methods (x.f()).
GLOBAL_ONLY = frozenset({
    "quantity", "isQuantity", "sign", "semver", "isSemver", "ip", "isIP", "cidr", "isCIDR", "url", "isURL",
    "bool", "int", "uint", "double", "string", "bytes", "dyn", "type", "duration", "timestamp", "has"})
MEMBER_ONLY = frozenset({
    "compareTo", "isGreaterThan", "isLessThan", "isInteger", "asInteger", "asApproximateFloat", "add", "sub",
    "major", "minor", "patch", "lowerAscii", "upperAscii", "trim", "replace", "split", "substring", "charAt",
    "indexOf", "lastIndexOf", "join", "find", "findAll", "isSorted", "sum", "min", "max", "includes", "reverse",
    "slice", "flatten", "sort", "sortBy", "distinct", "first", "last", "contains", "startsWith", "endsWith",
    "hasValue", "value", "orValue", "or", "optMap", "optFlatMap", "transformList", "transformMap",
    "transformMapEntry", "exists", "all", "exists_one", "map", "filter", "getHost", "getPort", "getScheme",
    "getEscapedPath", "getQuery", "family", "containsIP", "containsCIDR", "isLoopback", "isGlobalUnicast",
    "isLinkLocalMulticast", "isLinkLocalUnicast", "isUnspecified", "prefixLength", "masked", "validate"})
# Namespaces of global functions written like methods (sets.contains(...), optional.of(...)).
NAMESPACES = frozenset({"sets", "optional", "lists", "strings", "format", "math", "base64", "cel"})
# What each conversion accepts (a literal argument of another type has no overload).
CONVERSIONS = {"bool": {"bool", "string"}, "int": {"int", "uint", "double", "string"},
               "uint": {"int", "uint", "double", "string"}, "double": {"int", "uint", "double", "string"},
               "string": {"int", "uint", "double", "bool", "string", "bytes"}}
BOOL_TEXT = {"1": True, "t": True, "T": True, "true": True, "TRUE": True, "True": True,
             "0": False, "f": False, "F": False, "false": False, "FALSE": False, "False": False}
DEVICE_FIELDS = {"driver": "string", "attributes": "map", "capacity": "map", "allowMultipleAllocations": "bool"}
# Receivers a method is declared on (a literal receiver of another type has no overload).
_LISTS, _STRINGS = {"list"}, {"string"}
RECEIVERS = {**{n: _LISTS for n in ("reverse", "join", "sum", "min", "max", "isSorted", "slice", "flatten", "sort",
                                     "distinct", "first", "last", "includes")},
             **{n: _STRINGS for n in ("lowerAscii", "upperAscii", "trim", "replace", "split", "substring", "charAt",
                                      "contains", "startsWith", "endsWith", "matches", "find", "findAll")},
             "indexOf": {"string", "list"}, "lastIndexOf": {"string", "list"}}
# String methods whose arguments are all strings.
STRING_ARGUMENTS = frozenset({"contains", "startsWith", "endsWith", "matches", "find", "split"})
# What a method returns, where the result is plainly not a bool (a selector must be one).
RESULTS = {"size": "int", "indexOf": "int", "lastIndexOf": "int", "asInteger": "int", "sign": "int", "major": "int",
           "minor": "int", "patch": "int", "compareTo": "int", "asApproximateFloat": "double", "lowerAscii": "string",
           "upperAscii": "string", "trim": "string", "replace": "string", "substring": "string", "charAt": "string",
           "join": "string", "find": "string", "split": "list", "findAll": "list", "add": "kubernetes.Quantity",
           "sub": "kubernetes.Quantity", "quantity": "kubernetes.Quantity", "semver": "kubernetes.Semver"}

_CALL = re.compile(r"(\.\s*)?\b([A-Za-z_]\w*)\s*\(")
_DEVICE_FIELD = re.compile(r"\bdevice\s*\.\s*([A-Za-z_]\w*)")
_LITERAL = [(re.compile(r"^-?\d+u$"), "uint"), (re.compile(r"^-?(\d+\.\d*|\.\d+|\d+\.?\d*[eE][-+]?\d+)$"), "double"),
            (re.compile(r"^-?(0x[0-9a-fA-F]+|\d+)$"), "int"), (re.compile(r"^[rR]?('[^'\\]*'|\"[^\"\\]*\")$"), "string"),
            (re.compile(r"^(true|false)$"), "bool"), (re.compile(r"^null$"), "null_type")]
_KNOWN_FIELD = re.compile(r"^device\s*\.\s*(driver|allowMultipleAllocations)$")


def type_of(operand: str) -> str | None:
    """The type of a literal or a `device` field whose type is declared; None when not plain."""
    text = operand.strip()
    while text.startswith("(") and text.endswith(")") and scan(text).close(0) == len(text) - 1:
        text = text[1:-1].strip()
    field = _KNOWN_FIELD.match(text)
    if field:
        return DEVICE_FIELDS[field[1]]
    for pattern, kind in _LITERAL:
        if pattern.match(text):
            return kind
    return _arithmetic_type(text)


_ARITH = re.compile(r"[-+*/%]")


def _arithmetic_type(text: str) -> str | None:
    """The type of arithmetic whose typed operands agree: upstream picks the one overload that
    fits a dyn operand beside them (attribute + 1 is an int, attribute + 'x' a string)."""
    sc = scan(text)
    cuts = [pos for pos, _t in _top_level(text, sc, 0, len(text), _ARITH)
            if (before := sc.previous_char(pos)[1]) and (before.isalnum() or before in "_)]'\"")
            and not (text[pos] in "+-" and before in "eE" and text[pos - 1:pos].isalpha()
                     and pos > 1 and text[pos - 2].isdigit())]
    if not cuts or len(cuts) > 16:
        return None
    pieces, begin = [], 0
    for pos in cuts:
        pieces.append(text[begin:pos])
        begin = pos + 1
    pieces.append(text[begin:])
    kinds = {type_of(p) for p in pieces} - {None}
    return kinds.pop() if len(kinds) == 1 and kinds <= {"int", "uint", "double", "string"} else None


def error(expression: str) -> str | None:
    """What upstream's checker says of the expression, when the text shows it; None otherwise."""
    return (_call_form(expression) or _device_field(expression) or _result(expression) or _operands(expression)
            or _arithmetic(expression))


def _call_form(expression: str) -> str | None:
    sc = scan(expression)
    for m in _CALL.finditer(expression):
        name = m[2]
        if sc.in_string(m.start(2)):
            continue
        if m[1]:
            if sc.word_before(m.start()) in NAMESPACES:
                continue
            if name in GLOBAL_ONLY:
                return f"found no matching overload for '{name}' called as a method: it is a function, {name}(...)"
            receiver = _receiver_type(expression, sc, m.start())
            if receiver and name in RECEIVERS and receiver not in RECEIVERS[name]:
                return f"found no matching overload for '{name}' applied to '{receiver}.()'"
            if name in STRING_ARGUMENTS:
                for arg in sc.part_texts(m.end() - 1):
                    kind = type_of(arg)
                    if kind and kind != "string":
                        return f"found no matching overload for '{name}' applied to 'string.({kind})'"
        elif name in MEMBER_ONLY:
            return f"found no matching overload for '{name}' called as a function: it is a method, x.{name}(...)"
        elif name in CONVERSIONS:
            args = sc.part_texts(m.end() - 1)
            kind = type_of(args[0]) if len(args) == 1 else None
            if kind is not None and kind not in CONVERSIONS[name]:
                return f"found no matching overload for '{name}' applied to '({kind})'"
            if name == "bool" and kind == "string":
                text = args[0].strip().lstrip("rR")[1:-1]
                if text not in BOOL_TEXT:
                    return "type conversion error from 'string' to 'bool'"
    return None


def _receiver_type(expression: str, sc, dot: int) -> str | None:
    """The type of a literal receiver ending just before the dot at `dot` (string, list, number)."""
    at, c = sc.previous_char(dot)
    if c in "'\"" and sc.in_string(at):
        return "string"
    if c == "]" and at in sc.open_of:
        _i, before = sc.previous_char(sc.open_of[at])
        if not before or not (before.isalnum() or before in "_])'\""):
            return "list"
    if c.isdigit():
        start = at
        while start > 0 and (expression[start - 1].isalnum() or expression[start - 1] in "._"):
            start -= 1
        return type_of(expression[start:at + 1])
    return None


_TRAILING_CALL = re.compile(r"\.\s*([A-Za-z_]\w*)\s*\($")
_NOT_PLAIN = re.compile(r"==|!=|<|>|&&|\|\||\?|\bin\b|[-+*/%]")


def _result(expression: str) -> str | None:
    """A whole expression that is one call whose result is not a bool (x.size(), s.lowerAscii())."""
    text = expression.strip()
    sc = scan(text)
    if not text.endswith(")") or text.startswith("!"):
        return None
    opened = sc.open_of.get(len(text) - 1)
    if opened is None:
        return None
    if _NOT_PLAIN.search(_outside_brackets(text, sc)):
        return None
    m = _TRAILING_CALL.search(text[:opened + 1])
    name = m[1] if m else sc.word_before(opened)
    kind = RESULTS.get(name)
    return f"must evaluate to bool or the unknown type, not {kind}" if kind else None


def _outside_brackets(text: str, sc) -> str:
    """The text with every bracket's content and every string left out (one walk)."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c in "([{" and i in sc.close_of:
            out.append(c)
            i = sc.close(i)
            continue
        if c in "'\"" and sc.in_string(i):
            i = sc.string_end(i)
            continue
        out.append(c)
        i += 1
    return "".join(out)


_ARITHMETIC = re.compile(r"(?<![eE])[-+*/%]")


def _arithmetic(expression: str) -> str | None:
    """Arithmetic between two literals of different types (1 + 'a')."""
    sc = scan(expression)
    for m in _ARITHMETIC.finditer(expression):
        if sc.in_string(m.start()):
            continue
        left = re.search(r"('[^']*'|\"[^\"]*\"|[\w.]+)\s*$", expression[max(0, m.start() - 64):m.start()])
        right = re.match(r"\s*('[^']*'|\"[^\"]*\"|[\w.]+)", expression[m.end():])
        if not left or not right:
            continue
        a, b = type_of(left[1]), type_of(right[1])
        if a and b and a != b and "null_type" not in (a, b):
            return f"found no matching overload for '_{m[0]}_' applied to '({a}, {b})'"
    return None


def _device_field(expression: str) -> str | None:
    sc = scan(expression)
    for m in _DEVICE_FIELD.finditer(expression):
        if not sc.in_string(m.start()) and m[1] not in DEVICE_FIELDS:
            return f"undefined field '{m[1]}'"
    return None


_OPERATOR = re.compile(r"==|!=|&&|\|\||[,?:]")


def _operands(expression: str) -> str | None:
    """Equality between operands of plainly different types, and logic on plainly non-bool ones,
    inside every bracket and at the top (each level walked once: linear in the text)."""
    sc = scan(expression)
    for start, end in [(0, len(expression))] + [(i + 1, sc.close(i)) for i in sc.opens]:
        tokens = _top_level(expression, sc, start, end)
        clause_start = start
        clause: list[tuple[int, str]] = []
        for pos, token in tokens + [(end, ",")]:
            if token in (",", "?", ":"):
                why = _clause_error(expression, clause_start, pos, clause)
                if why:
                    return why
                clause_start, clause = pos + len(token), []
            else:
                clause.append((pos, token))
    return None


def _clause_error(text: str, start: int, end: int, operators: list[tuple[int, str]]) -> str | None:
    """One clause (between , ? :) with its top-level == != && || positions."""
    pieces, begin = [], start
    for pos, token in operators:
        pieces.append((text[begin:pos], token))
        begin = pos + len(token)
    pieces.append((text[begin:end], None))
    logical = any(t in ("&&", "||") for _p, t in pieces)
    for i, (piece, token) in enumerate(pieces):
        if token in ("==", "!=") and i + 1 < len(pieces):
            left, right = type_of(piece), type_of(pieces[i + 1][0])
            if left and right and left != right and "null_type" not in (left, right):
                return f"found no matching overload for '_==_' applied to '({left}, {right})'"
        previous = pieces[i - 1][1] if i else None
        if logical and token in ("&&", "||", None) and previous in ("&&", "||", None):
            kind = type_of(piece)
            if kind and kind != "bool":
                return f"expected type 'bool' but found '{kind}'"
        stripped = piece.strip()
        if stripped.startswith("!"):
            kind = type_of(stripped[1:])
            if kind and kind != "bool":
                return f"found no matching overload for '!_' applied to '({kind})'"
    return None


def _top_level(text: str, sc, start: int, end: int, pattern: re.Pattern = None) -> list[tuple[int, str]]:
    """Operator tokens directly inside text[start:end]: nested brackets and strings skipped."""
    pattern = pattern or _OPERATOR
    out, i = [], start
    while i < end:
        c = text[i]
        if c in "([{" and i in sc.close_of:
            i = sc.close(i) + 1
            continue
        if c in "'\"" and sc.in_string(i):
            i = sc.string_end(i)
            continue
        m = pattern.match(text, i)
        if m:
            out.append((i, m[0]))
            i = m.end()
            continue
        i += 1
    return out

