"""docs/development.md's floor plan is the modules' own docstrings: a module added, renamed or
re-described without it fails here (issue 33: the hand-written plan missed about 20 modules)."""

from tests import floorplan


def test_the_floor_plan_is_what_the_docstrings_say():
    assert floorplan.current() == floorplan.render(), "run: python -m tests.floorplan"


def test_every_module_says_what_it_is():
    for path in (floorplan.ROOT / "app").rglob("*.py"):
        if "__pycache__" not in path.parts and path.name != "__main__.py":
            assert floorplan.first_sentence(path), f"{path}: no docstring"
