"""The README's examples as data: its YAML blocks, and its ```console blocks (`$ command` lines,
continued with `\\` or an open quote, each followed by the output it prints: stdout, then stderr)."""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass

FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@dataclass
class Step:
    command: str
    expected: str
    line: int  # where the command starts in the README


def blocks(text: str, language: str) -> list[tuple[int, str]]:
    """(line number, body) of each fenced block in that language."""
    return [(text[:m.start()].count("\n") + 1, m[2]) for m in FENCE.finditer(text) if m[1] == language]


def _complete(command: str) -> bool:
    if command.endswith("\\"):
        return False
    try:
        shlex.split(command)
    except ValueError:  # an open quote: the command goes on
        return False
    return True


def console_steps(text: str) -> list[Step]:
    steps: list[Step] = []
    for start, body in blocks(text, "console"):
        lines = body.split("\n")[:-1]
        i = 0
        while i < len(lines):
            if not lines[i].startswith("$ "):
                raise ValueError(f"README line {start + 1 + i}: output before any `$ ` command")
            first, command = i, lines[i][2:]
            while not _complete(command):
                i += 1
                command += "\n" + lines[i]
            i += 1
            output = []
            while i < len(lines) and not lines[i].startswith("$ "):
                output.append(lines[i])
                i += 1
            steps.append(Step(command, "".join(f"{o}\n" for o in output), start + 1 + first))
    return steps


def run_step(step: Step, cwd, env, timeout: float = 120) -> str:
    result = subprocess.run(["bash", "-c", step.command], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=timeout)
    return result.stdout + result.stderr
