"""What a ResourceClaim holds: the results of its allocation, read in one place. Every counter of
held devices (namespace totals, rollout room, quota continuity, the device index) reads it."""

from __future__ import annotations


def allocation_results(claim: object) -> list[dict]:
    """The results of the claim's allocation (none while it is not allocated)."""
    status = claim.get("status") if isinstance(claim, dict) else None
    allocation = status.get("allocation") if isinstance(status, dict) else None
    devices = allocation.get("devices") if isinstance(allocation, dict) else None
    results = devices.get("results") if isinstance(devices, dict) else None
    return [r for r in results if isinstance(r, dict)] if isinstance(results, list) else []


def held_devices(claim: object, driver: str | None = None) -> set[tuple]:
    """The distinct devices (driver, pool, device) the claim holds, of one driver where given.
    An admin-access result watches a device without taking it: not held."""
    return {(r.get("driver"), r.get("pool"), r.get("device")) for r in allocation_results(claim)
            if not r.get("adminAccess") and (driver is None or r.get("driver") == driver)}
