"""The PolicyReport CRDs (wgpolicyk8s.io/v1alpha2) as Kyverno ships them, read from its Go module
(pinned below) through the Go module proxy: what a cluster with Kyverno has installed."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import yaml

from tests import gobuild

KYVERNO = "github.com/kyverno/kyverno@v1.19.1"
FILES = ("wgpolicyk8s.io_policyreports.yaml", "wgpolicyk8s.io_clusterpolicyreports.yaml")


def crds() -> list[dict]:
    go = gobuild.go_command("Kyverno's PolicyReport CRDs")
    result = subprocess.run([go, "mod", "download", "-json", KYVERNO], capture_output=True, text=True, timeout=900,
                            env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}, cwd="/")
    if result.returncode != 0:
        raise RuntimeError(f"go mod download {KYVERNO} failed: {result.stdout[-2000:]}{result.stderr[-2000:]}")
    folder = pathlib.Path(json.loads(result.stdout)["Dir"]) / "config" / "crds" / "policyreport"
    return [yaml.safe_load((folder / name).read_text()) for name in FILES]
