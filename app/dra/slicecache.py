"""What a full build derived from each ResourceSlice as the live inventory holds it (packed
bytes), kept for the next full build. Pure.

A live inventory rebuilds from scratch when Node labels, DeviceClasses or quotas change, or
after a relist, while reviews still read the previous index: two indexes at once. A slice whose
bytes did not change is not decoded or parsed again, and its devices are the very objects the
previous index holds, so a rebuild of 100,000 devices holds one set of them, not two.

Devices point into shape tables (app.dra.index), so the tables are carried with them: they only
grow, and a build starts from fresh ones (and nothing cached) when most of their shapes are no
longer any device's. When DeviceTaintRules change, the slices with a device that a rule added or
removed selects are derived again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .inventory import rule_selects


@dataclass
class ShapeTable:
    """Distinct device shapes, shared by every index built from one cache (append-only)."""

    ids: dict = field(default_factory=dict)  # shape key -> position
    shapes: list = field(default_factory=list)
    flat: list = field(default_factory=list)
    taints: list = field(default_factory=list)
    capacity: list = field(default_factory=list)
    identity_keys: dict = field(default_factory=dict)  # (domain, name) -> one shared tuple

    def __post_init__(self):
        self.tables = (self.shapes, self.flat)  # what each Device reads its shape through


@dataclass(frozen=True, slots=True)
class Derived:
    """What one slice gives an index: the slice as kept, its devices, the devices left out."""

    kept: dict
    devices: tuple
    rejected: tuple
    shadow: bool = False  # our reporter's stand-in: placed after the real slices, if at all


class SliceCache:
    def __init__(self, table: ShapeTable | None = None, taint_rules: list | None = None,
                 earlier: dict | None = None, changed_rules: list | None = None,
                 donors: "SliceCache | None" = None):
        self.table = table or ShapeTable()
        self.taint_rules = list(taint_rules or ())
        self._changed_rules = changed_rules or []  # added or removed since the build before
        self._earlier = earlier or {}  # raw -> Derived, of the build before
        self._donors = donors  # the build before's cache: slices derived again share with it
        self.entries: dict[bytes, Derived] = {}  # raw -> Derived, of this build
        self.raw_of: dict[str, bytes] = {}  # slice name -> its packed bytes
        self.reused = 0

    @classmethod
    def after(cls, previous: "SliceCache | None", taint_rules: list) -> "SliceCache":
        """A cache for the next full build: the previous one's shapes and entries where they
        still hold, else a fresh one."""
        if previous is None:
            return cls(taint_rules=taint_rules)
        used = {d.shape for entry in previous.entries.values() for d in entry.devices}
        if len(previous.table.shapes) - len(used) > max(256, len(used)):
            return cls(taint_rules=taint_rules, donors=previous)
        rules = list(taint_rules or ())
        changed = [r for r in previous.taint_rules if r not in rules] + \
            [r for r in rules if r not in previous.taint_rules]
        return cls(previous.table, rules, previous.entries, changed, previous)

    def donor(self, name: str) -> Derived | None:
        """What the slice of this name gave last (this build's, else the build before's)."""
        for cache in (self, self._donors):
            if cache is None:
                continue
            raw = cache.raw_of.get(name)
            if raw is not None and raw in cache.entries:
                return cache.entries[raw]
        return None

    def earlier(self, raw: bytes) -> Derived | None:
        found = self._earlier.get(raw)
        if found is None or self._touched(found):
            return None
        self.reused += 1
        return found

    def _touched(self, derived: Derived) -> bool:
        """A changed DeviceTaintRule selects one of the slice's devices."""
        if not self._changed_rules:
            return False
        spec = derived.kept["spec"]
        pool = (spec.get("pool") or {}).get("name")
        return any(rule_selects(rule["selector"], spec.get("driver"), pool, name)
                   for rule in self._changed_rules for name in spec["deviceNames"])

    def remember(self, name: str, raw: bytes, derived: Derived) -> None:
        self.forget(name)
        self.entries[raw] = derived
        self.raw_of[name] = raw

    def forget(self, name: str) -> None:
        """The slice changed or went: what was derived from its old bytes is let go."""
        raw = self.raw_of.pop(name, None)
        if raw is not None:
            self.entries.pop(raw, None)

    def done(self) -> None:
        """The build is complete: entries of slices it did not see are let go."""
        self._earlier, self._donors = {}, None
