"""RFC 6902 patch from original to planned object (keys like nvidia.com/gpu escaped by jsonpatch)."""

from __future__ import annotations

import jsonpatch
import orjson


def diff(original: dict, planned: dict) -> bytes:
    """Patch bytes; b'[]' when nothing changes."""
    operations = jsonpatch.make_patch(original, planned).patch
    return orjson.dumps(operations)


def apply(original: dict, patch: bytes) -> dict:
    return jsonpatch.apply_patch(original, orjson.loads(patch))
