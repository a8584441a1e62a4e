"""CEL tokens, with string and bytes literals decoded as cel-go decodes them. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.common import deadline

from .tree import PositionedError


class SyntaxFault(PositionedError):
    """A syntax error at a position."""


@dataclass(frozen=True)
class Token:
    kind: str  # int uint double string bytes ident punct eof
    text: str
    pos: int
    value: object = None


RESERVED = frozenset({"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop",
                      "package", "namespace", "return", "var", "void", "while"})
_PUNCT_TOKEN = re.compile(r"==|!=|<=|>=|&&|\|\||[<>!+\-*/%?:.,()\[\]{}]")
_SPACE = re.compile(r"(?:[ \t\r\n\f]+|//[^\n]*)+")
_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+[uU]?|(?:\d+\.\d+(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)"
                     r"|\d+[uU]?")
_IDENT = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")
_QUOTE = re.compile(r"'''|\"\"\"|'|\"")
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?", "a": "\a", "b": "\b", "f": "\f", "n": "\n",
            "r": "\r", "t": "\t", "v": "\v"}
MAX_INT = 2 ** 63 - 1
MAX_UINT = 2 ** 64 - 1


def tokens(text: str) -> list[Token]:
    out: list[Token] = []
    i, end = 0, len(text)
    while True:
        if not len(out) & 1023:
            deadline.check()  # a 10 KiB selector is a few thousand tokens: the review's time limit holds
        space = _SPACE.match(text, i)
        if space:
            i = space.end()
        if i >= end:
            out.append(Token("eof", "", i))
            return out
        c = text[i]
        prefix = _IDENT.match(text, i)
        if prefix and prefix.group(0).lower() in ("r", "b", "rb", "br") and _QUOTE.match(text, prefix.end()):
            letters = prefix.group(0).lower()
            token, i = _string(text, prefix.end(), raw="r" in letters, as_bytes="b" in letters, start=i)
            out.append(token)
        elif c in "'\"":
            token, i = _string(text, i, raw=False, as_bytes=False, start=i)
            out.append(token)
        elif c.isdigit() or (c == "." and i + 1 < end and text[i + 1].isdigit()):
            number = _NUMBER.match(text, i)
            assert number is not None  # a digit, or a dot before one, always starts a number
            out.append(_number(number.group(0), i))
            i = number.end()
        elif prefix:
            out.append(Token("ident", prefix.group(0), i))
            i = prefix.end()
        else:
            punct = _PUNCT_TOKEN.match(text, i)
            if punct is None:
                raise SyntaxFault(f"token recognition error at: '{c}'", i)
            out.append(Token("punct", punct.group(0), i))
            i = punct.end()


def _number(text: str, pos: int) -> Token:
    unsigned = text[-1] in "uU"
    body = text[:-1] if unsigned else text
    if body[:2] in ("0x", "0X"):
        value = int(body, 16)
    elif unsigned or not any(ch in body for ch in ".eE"):
        value = int(body)
    else:
        return Token("double", text, pos, float(body))
    if unsigned:
        if value > MAX_UINT:
            raise SyntaxFault(f"invalid uint literal: {text}", pos)
        return Token("uint", text, pos, value)
    return Token("int", text, pos, value)  # range checked by the parser, which knows the sign


def _string(text: str, i: int, raw: bool, as_bytes: bool, start: int) -> tuple[Token, int]:
    found = _QUOTE.match(text, i)
    assert found is not None  # called at a quote
    quote = found.group(0)
    i += len(quote)
    out: list = []
    while True:
        if i >= len(text) or (len(quote) == 1 and text[i] in "\r\n"):
            raise SyntaxFault("unterminated string literal", start)
        if text.startswith(quote, i):
            i += len(quote)
            break
        c = text[i]
        if c == "\\" and not raw:
            piece, i = _escape(text, i, as_bytes, start)
            out.append(piece)
            continue
        out.append(c)
        i += 1
    value = _join(out, as_bytes)
    return Token("bytes" if as_bytes else "string", text[start:i], start, value), i


def _escape(text: str, i: int, as_bytes: bool, start: int):
    kind = text[i + 1:i + 2]
    if kind in _ESCAPES:
        return _ESCAPES[kind], i + 2
    sizes = {"x": 2, "X": 2, "u": 4, "U": 8}
    if kind in sizes:
        digits = text[i + 2:i + 2 + sizes[kind]]
        if len(digits) != sizes[kind] or not all(d in "0123456789abcdefABCDEF" for d in digits):
            raise SyntaxFault("invalid escape sequence", i)
        code = int(digits, 16)
        if kind in "uU" and as_bytes:
            raise SyntaxFault("unicode escapes are not allowed in bytes literals", i)
        if kind in "uU" and (0xD800 <= code <= 0xDFFF or code > 0x10FFFF):
            raise SyntaxFault("invalid unicode code point", i)
        return (bytes([code]) if as_bytes and kind in "xX" else chr(code)), i + 2 + sizes[kind]
    octal = text[i + 1:i + 4]
    if len(octal) == 3 and all(d in "01234567" for d in octal):
        code = int(octal, 8)
        if code > 255:
            raise SyntaxFault("invalid octal escape", i)
        return (bytes([code]) if as_bytes else chr(code)), i + 4
    raise SyntaxFault("invalid escape sequence", i)


def _join(pieces: list, as_bytes: bool):
    if not as_bytes:
        return "".join(pieces)
    return b"".join(p if isinstance(p, bytes) else p.encode() for p in pieces)
