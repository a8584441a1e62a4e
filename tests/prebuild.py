"""`make test`'s first step: the Go programs the tests run (helm, promtool, the test NVML library,
NVIDIA's device plugin and GFD, the upstream oracle of each release), built from the Go module proxy where not cached yet, each said with its time, so
a first run that builds for minutes says so instead of looking stuck. Without Go each is skipped
here and its tests skip, saying so (an error where DRA_BRIDGE_REQUIRE_GO=1, as in CI)."""

from __future__ import annotations

import sys
import time

from tests.gobuild import GoUnavailable
from tests.helm import helmbin
from tests.monitoring import promtoolbin
from tests.nvml import library as nvml_library
from tests.nvml import nvidia
from tests.upstream import oracle

PROGRAMS = [("helm", helmbin.build), ("promtool", promtoolbin.build), ("the test NVML library", nvml_library.build),
            ("NVIDIA's device plugin and GFD", nvidia.build),
            *((f"upstream oracle, Kubernetes {r}", lambda r=r: oracle.build(r)) for r in sorted(oracle.RELEASES))]


def main() -> int:
    for what, build in PROGRAMS:
        started = time.monotonic()
        print(f"tests need {what}: ", end="", file=sys.stderr, flush=True)
        try:
            built = build()
        except GoUnavailable as exc:
            print(f"skipped ({exc})", file=sys.stderr)
            continue
        print(f"{built} ({time.monotonic() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
