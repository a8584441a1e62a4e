"""What an older release's allocator does differently from its API, where our search must do the
same to judge as its scheduler would. Pure.

Before 1.36 (k8s.io/dynamic-resource-allocation 0.34 and 0.35), preparing a firstAvailable
request computes subrequest i's "All" devices under the match-cache key of subrequest i-1 (0 for
the first): whichever subrequest fills a key first decides, for every device, what later lookups
under that key see while preparing (the cache is cleared before devices are allocated). So an
All subrequest may take the devices of the one before it (fixed upstream in 1.36)."""

from __future__ import annotations

from typing import Any

from .claims import ClaimSpec, Request


def before(release, minor: int) -> bool:
    """Whether the allocator followed is an older release's than 1.<minor> (None: the default's)."""
    return release is not None and release.minor < minor


def selector_stand_ins(spec: ClaimSpec, release) -> dict[str, Request]:
    """request path -> the subrequest whose selectors enumerate its All devices; empty where the
    release's allocator matches each subrequest by its own."""
    if not before(release, 36):
        return {}
    enumerate_as: dict[str, Request] = {}
    for alternatives in spec.requests:
        if len(alternatives) < 2 or not any(a.mode == "All" for a in alternatives):
            continue
        filled: dict[int, int] = {}  # cache key -> the subrequest that filled it
        for i, sub in enumerate(alternatives):
            key = max(i - 1, 0)
            if sub.mode == "All":
                filled.setdefault(key, i)
                enumerate_as[sub.path] = alternatives[filled[key]]
    return enumerate_as


def all_continues_as_first(rows, release) -> dict[int, Any]:
    """id(alternative) -> the first alternative of its row, for All subrequests after the first:
    before 1.36 the allocator takes their first device, then goes on with the first subrequest's
    devices from the second on (the subrequest index is lost between devices)."""
    if not before(release, 36):
        return {}
    return {id(alt): row[0] for row in rows if len(row) > 1 for alt in row[1:] if alt.req.mode == "All"}


def searched_pools(view, release, now: bool) -> list:
    """The pools a search takes devices from, in order: complete ones; incomplete ones too when
    judging what could be (and now on 1.34, whose allocator takes exact counts from them); on
    1.34 also invalid ones, which stop the search with an error where it reaches them (1.35+
    skips them and fails only that node)."""
    old = before(release, 35)
    return [p for p in view if p.status == "ok" or (p.status == "incomplete" and (old or not now))
            or (p.status == "invalid" and old)]


def all_skips_used_capacity(release) -> bool:
    """Before 1.37 an All request leaves out a shareable device whose remaining capacity cannot
    hold its request (1.37 keeps it, and the request fails)."""
    return before(release, 37)
