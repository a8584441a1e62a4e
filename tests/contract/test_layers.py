"""The layout's rules (README "Layout"): the import-linter contracts in pyproject.toml hold, they
catch a wrong import, and callers use a package's exports rather than its private modules."""

import os
import shutil
import subprocess
import sys

import grimp
import pytest

from tests.conftest import ROOT

LINT_IMPORTS = os.path.join(os.path.dirname(sys.executable), "lint-imports")
PACKAGES = ("cli", "server", "application", "migration", "dra", "reporter", "kube", "policy", "certs", "cel",
            "common")


def lint(cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([LINT_IMPORTS, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env=env)


@pytest.fixture
def scratch(tmp_path):
    """A copy of app/ and pyproject.toml to break on purpose."""
    shutil.copytree(ROOT / "app", tmp_path / "app", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_contracts_are_kept():
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


@pytest.mark.parametrize("module, wrong_import, contract", [
    ("cel/checker.py", "from app.server import admission", "Layers"),  # upward
    ("cel/parser.py", "from app.policy import Policy", "Layers"),  # a language under the policy
    ("migration/planner.py", "from app import dra", "Layers"),  # siblings are independent
    ("common/errors.py", "from app.policy import Policy", "Layers"),
    ("dra/index.py", "import socket", "Pure core"),  # IO in the pure core
    ("migration/patch.py", "from app import kube", "Pure core"),
    ("reporter/render.py", "import pynvml", "Pure core"),
    ("application/facts.py", "from app.server import admission", "Layers"),  # below the shells
    ("migration/planner.py", "from app import application", "Layers"),  # above the domain
    ("cli/plancli.py", "from app.server import mutation", "Thin shells"),  # a preview reaching into serve
    ("cli/rolloutcli.py", "from app.cli import auditcli", "Thin shells"),  # a command importing another
])
def test_a_wrong_import_breaks_a_contract(scratch, module, wrong_import, contract):
    path = scratch / "app" / module
    path.write_text(path.read_text() + f"\n{wrong_import}  # noqa\n")
    result = lint(scratch)
    assert result.returncode != 0
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken and module.replace("/", ".").removesuffix(".py") in broken, result.stdout


def test_callers_import_packages_not_their_private_modules():
    """Across subpackages, an import names the package or a submodule it exports in __all__."""
    import importlib

    graph = grimp.build_graph("app", cache_dir=None)
    exported = {p: set(importlib.import_module(f"app.{p}").__all__) for p in PACKAGES}
    offences = []
    for importer in graph.modules:
        home = importer.split(".")[1] if importer.count(".") >= 1 else None
        for imported in graph.find_modules_directly_imported_by(importer):
            parts = imported.split(".")
            if len(parts) < 3 or parts[1] == home:
                continue
            if parts[2] not in exported.get(parts[1], set()):
                details = graph.get_import_details(importer=importer, imported=imported)
                offences.append(f"{importer}:{details[0]['line_number']} imports {imported}")
    assert not offences, "\n".join(offences)


def test_every_package_says_what_it_owns():
    import importlib

    for name in PACKAGES:
        package = importlib.import_module(f"app.{name}")
        assert package.__doc__ and len(package.__doc__.strip().splitlines()) <= 2, name
        for symbol in package.__all__:
            assert hasattr(package, symbol), f"app.{name}.__all__ names {symbol}, which it lacks"
