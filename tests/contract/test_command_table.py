"""Issue 57 item 4: commands are wired by plain imports in app/cli/commands.py (grep and the
import contracts see them), still imported only when they run."""

import inspect
import subprocess
import sys

from tests.conftest import ROOT


def test_every_runner_imports_and_calls_a_function_that_exists():
    from app.cli import commands

    runners = [f for name, f in vars(commands).items() if inspect.isfunction(f) and not name.startswith("_")]
    assert len(runners) == 9
    for runner in runners:
        source = inspect.getsource(runner)
        module, function = source.split("from .")[1].split(" import ")
        target = __import__(f"app.cli.{module}", fromlist=[function.split()[0]])
        assert callable(getattr(target, function.split()[0])), runner.__name__


def test_parsing_a_command_loads_neither_the_server_nor_its_runner():
    code = ("import sys; from app.cli.main import build_parser; build_parser().parse_args(['plan', '-f', 'x.yaml']); "
            "print(sorted(m for m in sys.modules if m.startswith(('app.server', 'app.cli.plancli'))))")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert found.returncode == 0 and found.stdout.strip() == "[]", found.stdout + found.stderr
