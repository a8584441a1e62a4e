"""The argument parser every command shares: one error prefix, the command's own usage for a flag
it does not know (with the nearest it does), and value types that refuse bad numbers in one line."""

from __future__ import annotations

import argparse
import difflib
import math
import re
import sys


class BadValue(argparse.ArgumentTypeError, ValueError):
    """A flag's value refused: argparse says it as is; opt() (a DRA_BRIDGE_* variable) catches ValueError."""


class Parser(argparse.ArgumentParser):
    def parse_known_args(self, args=None, namespace=None):
        found, extras = super().parse_known_args(args, namespace)
        if extras and self._subparsers is None and " " in self.prog:  # a command: it says what it lacks
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return found, extras

    def error(self, message: str):
        self.print_usage(sys.stderr)
        command = self.prog.partition(" ")[2]
        self.exit(2, f"dra-bridge: error: {command + ': ' if command else ''}{message}{self._nearest(message)}\n")

    def _nearest(self, message: str) -> str:
        """`; did you mean --inventory?` for a flag or command nearly spelled right."""
        unknown = re.match(r"unrecognized arguments: (\S+)", message)
        if unknown:
            word, known = unknown[1].split("=", 1)[0], list(self._option_string_actions)
        else:
            choice = re.search(r"invalid choice: '([^']*)'", message)
            if not choice:
                return ""
            word = choice[1]
            known = [c for a in self._actions if isinstance(a, argparse._SubParsersAction) for c in a.choices]
            known += [c for a in self._actions if a.choices and not isinstance(a, argparse._SubParsersAction)
                      for c in a.choices if isinstance(c, str)]
        close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
        return f"; did you mean {close[0]}?" if close else ""


def port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise BadValue(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise BadValue(f"{value} is not a port (0-65535)")
    return value


def at_least(least: int):
    """A whole number no smaller than `least` (days, counts, connections)."""
    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise BadValue(f"{text!r} is not a whole number") from None
        if value < least:
            raise BadValue(f"{value}: at least {least}")
        return value
    whole.__name__ = f"whole number >= {least}"
    return whole


def seconds(text: str) -> float:
    """A duration in seconds: a finite number, 0 or more (0 means what the flag's help says)."""
    try:
        value = float(text)
    except ValueError:
        raise BadValue(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise BadValue(f"{text}: seconds are a finite number, 0 or more")
    return value


def positive_seconds(text: str) -> float:
    """A duration that must pass (a timeout, a loop's pause): more than 0."""
    value = seconds(text)
    if value == 0:
        raise BadValue("0: must be more than 0 seconds")
    return value
