"""`promtool` built from Prometheus's own Go module (go.mod here pins it), cached like helm."""

from __future__ import annotations

import pathlib

from tests import gobuild

HERE = pathlib.Path(__file__).resolve().parent


def build() -> pathlib.Path:
    return gobuild.build(HERE, ("go.mod", "go.sum"), ("github.com/prometheus/prometheus/cmd/promtool",),
                         "promtool") / "promtool"
