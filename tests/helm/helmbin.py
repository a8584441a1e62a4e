"""`helm` built from Helm's own Go module (go.mod here pins helm.sh/helm/v4), cached like the
e2e control plane."""

from __future__ import annotations

import pathlib
import subprocess

from tests import gobuild

HERE = pathlib.Path(__file__).resolve().parent
CHART = HERE.parents[1] / "charts" / "dra-bridge"


def build() -> pathlib.Path:
    return gobuild.build(HERE, ("go.mod", "go.sum"), ("helm.sh/helm/v4/cmd/helm",), "helm") / "helm"


# No image is published: the chart needs one named, as the manifests' placeholder is.
IMAGE = ("--set", "image.repository=registry.example.com/dra-bridge")


def template(helm: pathlib.Path, *args: str, namespace: str = "dra-bridge",
             image: tuple[str, ...] = IMAGE) -> subprocess.CompletedProcess:
    return subprocess.run([str(helm), "template", "dra-bridge", str(CHART), "--namespace", namespace, *image, *args],
                          capture_output=True, text=True, timeout=120)
