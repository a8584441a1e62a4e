"""Device selectors and admin-policy programs: parse once, check types, estimate the cost,
rewrite for the engine and compile; evaluate against ResourceSlice devices. Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from app.common import parse_quantity, vocabulary

from . import checker, constants, cost, engine, printer, reads, rewrite
from .engine import CelError
from .lexer import SyntaxFault
from .library.semver import semver_value
from .parser import parse
from .types import BOOL, DYN, display
from .values import MAX_COST, quantity_value

MAX_EXPRESSION_LENGTH = vocabulary.DRA_MAX_CEL_LENGTH


@dataclass(frozen=True)
class Selector:
    expression: str
    program: object
    domains: tuple = ()  # (attributes|capacity, domain) the expression looks up
    reads: tuple | None = None  # what of the device the result can depend on (see reads.reads)
    mentions: frozenset = frozenset()  # every name it mentions (see reads.mentions)

    def matches(self, device: dict) -> bool:
        """True/False for one device (a dict from `device_variable`); CelError on runtime errors."""
        missing = [(kind, d) for kind, d in self.domains if d not in device[kind]]
        if missing:
            # As upstream: a domain the device does not have reads as an empty map.
            device = {**device, "attributes": dict(device["attributes"]), "capacity": dict(device["capacity"])}
            for kind, domain in missing:
                device[kind][domain] = {}
        result = engine.run(self.program, {"device": device})
        if not isinstance(result, bool):
            raise CelError(f"selector must evaluate to bool, got {type(result).__name__}")
        return result


def _front_end(expression: str, env: checker.Environment):
    """Parse and check; the tree and its annotations. CelError says what upstream would."""
    if not isinstance(expression, str) or not expression.strip():
        raise CelError("expression is empty")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CelError(f"expression is {len(expression)} characters, more than the limit {MAX_EXPRESSION_LENGTH}")
    try:
        tree = parse(expression)
    except SyntaxFault as exc:
        raise CelError(f"syntax error at {exc.pos}: {exc}") from exc
    try:
        checked = checker.check(tree, env)
    except checker.CheckError as exc:
        raise CelError(str(exc)) from exc
    failed = constants.first_failure(tree)
    if failed is not None:  # the API server folds these when it plans the program
        raise CelError(f"program instantiation failed: {failed[1]}")
    return tree, checked


def estimated_cost(expression: str) -> int | None:
    """Upstream's creation-time estimate for a selector that parses and checks, else None."""
    try:
        tree, checked = _front_end(expression, checker.Environment({"device": "Device"}, list_attributes=True))
    except CelError:
        return None
    return cost.estimate(tree, checked)


@lru_cache(maxsize=4096)
def compile_selector(expression: str, list_attributes: bool = False, consumable_capacity: bool = True) -> Selector:
    """Compile once per distinct expression; CelError says what is wrong. list_attributes: the
    environment of clusters with DRAListTypeAttributes on (alpha, off in Kubernetes 1.37):
    attribute values may be lists, iterated by macros and searched with includes().
    consumable_capacity False: clusters without DRAConsumableCapacity (before 1.36), where
    `device.allowMultipleAllocations` is not declared."""
    env = checker.Environment({"device": "Device"}, list_attributes, consumable_capacity)
    tree, checked = _front_end(expression, env)
    result = checked.type_of(tree)
    if result not in (BOOL, DYN):
        raise CelError(f"must evaluate to bool or the unknown type, not {display(result)}")
    spent = cost.estimate(tree, checked)
    if spent > MAX_COST:
        raise CelError(f"estimated cost {spent} exceeds the limit {MAX_COST}: reduce nested comprehensions")
    program = engine.compile_source(printer.source(rewrite.for_engine(tree, checked)))
    return Selector(expression, program, *reads.analyse(tree))


def compile_program(expression: str, variables: frozenset[str], result: str | None = None):
    """A general CEL program over the given variables (each dyn), with the selector library:
    admin policy checks. result: the type it must evaluate to ("bool", "string"; the unknown type
    passes, as the API server's checker lets dyn through). CelError names what is wrong."""
    tree, checked = _front_end(expression, checker.Environment({name: DYN for name in variables}))
    found = checked.type_of(tree)
    if result is not None and found not in (result, DYN):
        raise CelError(f"must evaluate to {result}, not {display(found)}")
    return engine.compile_source(printer.source(rewrite.for_engine(tree, checked)))


def run_program(program, values: dict):
    """Evaluate a compile_program result; CelError on runtime errors."""
    return engine.run(program, values)


_LIST_TYPES: dict[str, Callable] = {"ints": int, "bools": bool, "strings": str, "versions": semver_value}


def _attribute_value(raw: dict):
    """The CEL value of one attribute; ValueError for a value upstream could not use either."""
    if not isinstance(raw, dict):
        raise ValueError("attribute must be an object")
    if "int" in raw:
        return int(raw["int"])
    if "bool" in raw:
        return bool(raw["bool"])
    if "string" in raw:
        return str(raw["string"])
    if "version" in raw:
        return semver_value(str(raw["version"]))
    for key, convert in _LIST_TYPES.items():
        if key in raw:  # list-typed attributes (alpha): lists in CEL, as upstream evaluates them
            if not isinstance(raw[key], list):
                raise ValueError(f"attribute {key} must be a list")
            return [convert(v) for v in raw[key]]
    raise ValueError(f"attribute has no known value type: {sorted(raw)}")


def device_variable(driver: str, device: dict, allow_multiple: bool | None = None) -> dict:
    """The CEL `device` for one ResourceSlice device: names without a domain belong to the driver."""
    # A domain is present only when the device has something in it (upstream); lookups in a
    # missing domain see an empty map (Selector.matches, rewrite's computed domains).
    attributes: dict[str, dict] = {}
    for name, raw in (device.get("attributes") or {}).items():
        domain, _, short = name.rpartition("/")
        attributes.setdefault(domain or driver, {})[short] = _attribute_value(raw)
    capacity: dict[str, dict] = {}
    for name, raw in (device.get("capacity") or {}).items():
        domain, _, short = name.rpartition("/")
        capacity.setdefault(domain or driver, {})[short] = quantity_value(parse_quantity(raw.get("value")))
    multiple = device.get("allowMultipleAllocations", False) if allow_multiple is None else allow_multiple
    return {"driver": driver, "attributes": attributes, "capacity": capacity,
            "allowMultipleAllocations": bool(multiple)}
