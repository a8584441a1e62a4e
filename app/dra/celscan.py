"""One pass over a CEL expression's text: string literals, bracket pairs, separators. Pure.

Compile-time checks and rewrites ask "is this position inside a string?", "where does this
bracket close?", "which commas split these arguments?" many times. Answering each from one
scan keeps them linear in the expression's length: a 10 KiB selector must not cost seconds.
"""

from __future__ import annotations

import bisect
import re
from functools import lru_cache

from app.common import deadline

# Quotes as the checks have always read them: ' or ", backslash escapes, unterminated to the end.
_TOKEN = re.compile(r"'(?:[^'\\]|\\.)*'?|\"(?:[^\"\\]|\\.)*\"?|[()\[\]{},:]", re.S)
TOP = -1  # the "bracket" enclosing the whole text


class Scan:
    __slots__ = ("text", "_starts", "_ends", "close_of", "open_of", "opens", "_separators")

    def __init__(self, text: str):
        self.text = text
        self._starts: list[int] = []
        self._ends: list[int] = []
        self.close_of: dict[int, int] = {}
        self.open_of: dict[int, int] = {}
        self.opens: list[int] = []  # positions of ( [ { outside strings, in order
        self._separators: dict[int, list[tuple[int, str]]] = {TOP: []}
        stack: list[int] = []
        for n, m in enumerate(_TOKEN.finditer(text)):
            if not n & 1023:
                deadline.check()
            pos, c = m.start(), text[m.start()]
            if c in "'\"":
                self._starts.append(pos)
                self._ends.append(m.end())
            elif c in "([{":
                stack.append(pos)
                self.opens.append(pos)
                self._separators[pos] = []
            elif c in ")]}":
                if stack:
                    opened = stack.pop()
                    self.close_of[opened] = pos
                    self.open_of[pos] = opened
            else:
                self._separators[stack[-1] if stack else TOP].append((pos, c))
        for opened in stack:
            self.close_of[opened] = len(text)  # unclosed: runs to the end

    def in_string(self, pos: int) -> bool:
        i = bisect.bisect_right(self._starts, pos) - 1
        return i >= 0 and pos < self._ends[i]

    def string_end(self, pos: int) -> int:
        """Where the string literal holding `pos` ends (just past its closing quote); pos when none."""
        i = bisect.bisect_right(self._starts, pos) - 1
        return self._ends[i] if i >= 0 and pos < self._ends[i] else pos

    def close(self, open_at: int) -> int:
        return self.close_of.get(open_at, len(self.text))

    def parts(self, open_at: int = TOP, separator: str = ",") -> list[tuple[int, int]]:
        """(start, end) spans of what `separator` splits directly inside the bracket at open_at."""
        start = 0 if open_at == TOP else open_at + 1
        end = len(self.text) if open_at == TOP else self.close(open_at)
        out = []
        for pos, c in self._separators.get(open_at, ()):
            if c == separator:
                out.append((start, pos))
                start = pos + 1
        out.append((start, end))
        return out

    def part_texts(self, open_at: int = TOP, separator: str = ",") -> list[str]:
        return [self.text[a:b] for a, b in self.parts(open_at, separator)]

    def previous_char(self, pos: int) -> tuple[int, str]:
        """The last non-space character before pos: (index, char), (-1, "") when none."""
        i = pos - 1
        while i >= 0 and self.text[i].isspace():
            i -= 1
        return (i, self.text[i]) if i >= 0 else (-1, "")

    def word_before(self, pos: int) -> str:
        """The identifier ending just before pos (spaces skipped), "" when none."""
        i, _c = self.previous_char(pos)
        end = i + 1
        while i >= 0 and (self.text[i].isalnum() or self.text[i] == "_"):
            i -= 1
        return self.text[i + 1:end]


@lru_cache(maxsize=64)
def scan(text: str) -> Scan:
    return Scan(text)
