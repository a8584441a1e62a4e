"""Objects held for long as packed bytes: JSON, zlib-compressed (level 1).

A live inventory holds every ResourceSlice and ResourceClaim of the cluster to rebuild from;
as plain JSON bytes 100,000 devices were 46 MB, packed about a seventh of that (a node's
devices repeat each other's attribute names). Packing is deterministic, so equal objects pack
to equal bytes: a change is seen by comparing them, and they key what was derived from them.
"""

from __future__ import annotations

import zlib

import orjson


def pack(obj) -> bytes:
    return zlib.compress(orjson.dumps(obj), 1)


def unpack(packed: bytes):
    return orjson.loads(zlib.decompress(packed))
