"""Which devices pass a request's selectors: each expression's outcome per device shape (or
per device, when it reads identity attributes), computed lazily and kept on the index across
checks. Pure."""

from __future__ import annotations

from app.common import deadline
from app.common import release as releases

from app import cel

from . import search
from .claims import Request
from .index import Index
from .slicefields import IDENTITY_ATTRIBUTES

_UNKNOWN = object()


class Results:
    """One expression's outcome per shape (or per device when it reads identity attributes):
    True, False or the runtime error text; evaluated on first use."""

    def __init__(self, selector, index: Index):
        # The lists live-index snapshots share, not the snapshot: a cached result must not keep
        # an old snapshot (its views, groups) alive.
        self.selector, self.devices, self.shapes = selector, index.devices, index.shapes
        self.per_device = not IDENTITY_ATTRIBUTES.isdisjoint(selector.mentions)
        self.values: list = [_UNKNOWN] * (len(index.devices) if self.per_device else len(index.shapes))
        self.by_reads: dict = {}  # what the expression reads of a device -> its outcome

    def at(self, p: int):
        slot = p if self.per_device else self.devices[p].shape
        if slot >= len(self.values):  # an incremental update appended devices or shapes
            self.values.extend([_UNKNOWN] * (slot + 1 - len(self.values)))
        value = self.values[slot]
        if value is _UNKNOWN:
            key = _projection(self.devices, self.shapes, p, self.selector.reads) \
                if self.selector.reads is not None else None
            value = self.by_reads.get(key, _UNKNOWN) if key is not None else _UNKNOWN
            if value is _UNKNOWN:
                variable = self.devices[p].variable if self.per_device else self.shapes[slot]
                deadline.check()
                try:
                    value = self.selector.matches(variable)
                except cel.CelError as exc:
                    value = str(exc)
                if key is not None:
                    self.by_reads[key] = value
            self.values[slot] = value
        return value


_MISSING = "\0missing"


def _projection(devices: list, shapes: list, p: int, reads: tuple) -> tuple:
    """The values of the fields an expression reads, for device p: devices equal there get the
    same outcome, so it is computed once (most selectors read one or two attributes)."""
    device = devices[p]
    shape = shapes[device.shape]
    out = []
    for read in reads:
        if len(read) == 1:
            out.append(repr(shape.get(read[0])))
            continue
        kind, domain, name = read
        value = device.identity_value(domain, name, _MISSING) if kind == "attributes" else _MISSING
        if value is _MISSING:
            value = shape[kind].get(domain, {}).get(name, _MISSING)
        out.append(repr(value))
    return tuple(out)


class Selection:
    """Does a device pass a request's class selectors and then its own, in upstream's order
    (the first false stops; a runtime error aborts the node)?"""

    def __init__(self, index: Index):
        self.index = index
        self.errors: list[str] = []
        self.parts: dict[str, list[tuple[str, Results | None]]] = {}  # request path -> (label, results)
        self._per_device: bool | None = None

    def results(self, expr: str, path: str) -> Results | None:
        try:
            # The release's CEL environment: before 1.36 `device.allowMultipleAllocations` is undefined.
            release = self.index.release
            selector = cel.compile_selector(expr, consumable_capacity=release is None
                                            or release.has(releases.CONSUMABLE_CAPACITY))
        except cel.CelError as exc:
            self.errors.append(f"{path}: {exc}")
            return None
        cache = self.index.selector_cache
        if expr not in cache:
            if len(cache) >= 10_000:
                cache.clear()
            cache[expr] = Results(selector, self.index)
        return cache[expr]

    def prepare(self, req: Request) -> None:
        parts = []
        device_class = self.index.classes.get(req.device_class)
        if device_class is not None:
            for i, sel in enumerate((device_class.get("spec") or {}).get("selectors") or []):
                expr = ((sel or {}).get("cel") or {}).get("expression", "")
                results = self.results(expr, f"deviceclasses/{req.device_class}.spec.selectors[{i}]")
                parts.append((f"DeviceClass {req.device_class} selector {i}", results))
        for i, expr in enumerate(req.selectors):
            results = self.results(expr, f"{req.path}.selectors[{i}].cel.expression")
            parts.append((f"{req.path}.selectors[{i}] `{short(expr)}`", results))
        self.parts[req.path] = parts

    @property
    def per_device(self) -> bool:
        if self._per_device is None:
            self._per_device = any(r is not None and r.per_device for parts in self.parts.values() for _l, r in parts)
        return self._per_device

    def __call__(self, req: Request, p: int) -> bool:
        for label, results in self.parts[req.path]:
            value = results.at(p) if results is not None else False  # does not compile: matches nothing
            if value is True:
                continue
            if value is False:
                return False
            raise search.AllocationError(f"{label} on device {'/'.join(map(str, self.index.devices[p].key))}: "
                                         f"CEL runtime error: {value}")
        return True

    def failed_parts(self, req: Request, p: int) -> list[str]:
        """Labels of the selectors device p does not pass (a runtime error counts as failing)."""
        return [label for label, results in self.parts[req.path] if results is None or results.at(p) is not True]

    def pattern(self, view, reqs: list[Request]) -> tuple:
        """Per-device selector outcomes on a node's devices: nodes with equal patterns (and equal
        views) are decided alike."""
        out = []
        for pool in view:
            for p in pool.devices:
                out.append(tuple(results.at(p) for req in reqs for _l, results in self.parts[req.path]
                                 if results is not None and results.per_device))
        return tuple(out)


def short(expr: str, limit: int = 70) -> str:
    expr = " ".join(expr.split())
    return expr if len(expr) <= limit else expr[: limit - 3] + "..."
