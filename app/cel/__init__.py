"""CEL as Kubernetes 1.37 runs it (DRA device selectors, admin-policy programs): a language one floor
above common, parsed once into a tree that the checker, cost, rewrites and reads walk. Pure."""

# Each expression is parsed once (`parser`) into a tree (`tree`) that the type checker
# (`checker`), the cost estimator (`cost`), the engine rewrites (`rewrite`, `printer`) and the read
# analysis (`reads`) walk; every function is declared once, in the module of its library
# (`library`). Evaluation runs on the Rust engine (`engine`).

from . import build, engine
from .engine import CelError
from .library.regex import regex, regex_error
from .library.semver import normalized_semver, semver_value
from .selector import (
                       MAX_EXPRESSION_LENGTH,
                       Selector,
                       compile_program,
                       compile_selector,
                       device_variable,
                       estimated_cost,
                       run_program,
)
from .printer import string_literal
from .values import MAX_COST, quantity_value

__all__ = ["build", "engine", "MAX_COST", "MAX_EXPRESSION_LENGTH", "CelError", "Selector", "compile_program", "compile_selector",
           "device_variable", "estimated_cost", "normalized_semver", "quantity_value", "regex", "regex_error",
           "run_program", "semver_value", "string_literal"]
