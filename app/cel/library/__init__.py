"""The DRA CEL environment's library, one module per library upstream declares; this package
gathers their declarations (what the checker and the cost estimator read) and the Python
functions the evaluation engine lacks."""

from __future__ import annotations

from collections import defaultdict

from . import (
    core,
    format,
    guards,
    ip,
    lists,
    optional,
    quantity,
    regex,
    semver,
    sets,
    strings,
    urls,
)
from .decl import Overload

LIBRARIES = (core, quantity, semver, strings, regex, lists, sets, optional, urls, ip, format)
OVERLOADS: dict[str, list[Overload]] = defaultdict(list)
FUNCTIONS: dict = {}
for _library in LIBRARIES:
    for _overload in _library.DECLARATIONS:
        OVERLOADS[_overload.name].append(_overload)
    FUNCTIONS.update(_library.FUNCTIONS)
OVERLOADS = dict(OVERLOADS)
FUNCTIONS = guards.guarded(FUNCTIONS, OVERLOADS)
NAMESPACES = frozenset(name.split(".")[0] for name in OVERLOADS if "." in name) | {"cel"}

__all__ = ["FUNCTIONS", "LIBRARIES", "NAMESPACES", "OVERLOADS", "Overload", "regex"]
