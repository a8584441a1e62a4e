"""Issue 57: an exception raised while handling another keeps it as its cause (`from exc`), so a
log line with the traceback shows what went wrong underneath. `from None` stays only where the
handler binds nothing (the caught error carries nothing worth keeping: a KeyError of a lookup)."""

import ast

from tests.conftest import ROOT


def _dropped_causes(tree: ast.AST, where: str) -> list[str]:
    found = []

    def visit(node, handler):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ExceptHandler):
                visit(child, child)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                visit(child, None)
            else:
                if isinstance(child, ast.Raise) and handler is not None and handler.name and \
                        isinstance(child.cause, ast.Constant) and child.cause.value is None:
                    found.append(f"{where}:{child.lineno}: raise ... from None drops {handler.name}")
                visit(child, handler)
    visit(tree, None)
    return found


def test_no_handler_drops_the_exception_it_caught():
    found = []
    for path in sorted((ROOT / "app").rglob("*.py")):
        found += _dropped_causes(ast.parse(path.read_text()), str(path.relative_to(ROOT)))
    assert not found, found


def test_the_check_sees_a_dropped_cause():
    source = "try:\n    x()\nexcept ValueError as exc:\n    raise KeyError('k') from None\n"
    assert _dropped_causes(ast.parse(source), "f") == ["f:4: raise ... from None drops exc"]
