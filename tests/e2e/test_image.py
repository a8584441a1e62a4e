"""Issue 32: the image is real. `make image` builds it (podman or buildah here; the Python base
from Debian's packages where no registry answers) and the webhook runs *from the image* against
the real control plane, as the Deployment runs it: its arguments, non-root, a read-only root
filesystem, the certificates and the policy mounted read-only, the service account's token where
the kubelet puts it. It migrates a pod, and a SIGTERM drains it to a clean exit."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import time

import pytest

from tests.conftest import ROOT
from tests.e2e.cluster import free_port
from tests.e2e.conftest import POLICY, Webhook, rendered_manifests, wait_for

IMAGE = "localhost/dra-bridge:e2e"
ENGINE = shutil.which("podman")
SA = "/var/run/secrets/kubernetes.io/serviceaccount"
FILES = resource.getrlimit(resource.RLIMIT_NOFILE)[1]  # runc cannot raise the hard limit


@pytest.fixture(scope="module")
def image():
    if ENGINE is None:
        if os.environ.get("DRA_BRIDGE_E2E_IMAGE_REQUIRED"):
            pytest.fail("podman is not installed, and this run must build the image (.ci/run installs it)")
        pytest.skip("podman is not installed (apt-get install podman buildah debootstrap): the image is not built")
    env = {**os.environ, "IMAGE": IMAGE, "ENGINE": "podman",
           "PYTHON_IMAGE": os.environ.get("DRA_BRIDGE_E2E_PYTHON_IMAGE", "debian")}
    started = time.monotonic()
    built = subprocess.run([str(ROOT / "image" / "build.sh")], env=env, capture_output=True, text=True, timeout=1200)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    print(f"image built in {time.monotonic() - started:.0f}s")
    return IMAGE


def deployment_args(cluster) -> list[str]:
    [deployment] = [d for d in rendered_manifests(cluster) if d["kind"] == "Deployment"]
    [container] = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "webhook"]
    return container["args"]


def mounts(cluster, webhook: Webhook, tmp_path) -> list[str]:
    """What the Deployment's volumes hold, as files a non-root user can read (Secret and
    ConfigMap volumes: mode 0644), and the token the kubelet mounts."""
    tls, policy, account = tmp_path / "tls", tmp_path / "policy", tmp_path / "account"
    for folder in (tls, policy, account):
        folder.mkdir()
        folder.chmod(0o755)
    shutil.copy(webhook.bundle.cert, tls / "tls.crt")
    shutil.copy(webhook.bundle.key, tls / "tls.key")
    (policy / "policy.yaml").write_text(json.dumps(POLICY))
    (account / "token").write_text(cluster.token("dra-bridge", "dra-bridge"))
    shutil.copy(cluster.ca, account / "ca.crt")
    (account / "namespace").write_text("dra-bridge")
    for f in [*tls.iterdir(), *policy.iterdir(), *account.iterdir()]:
        f.chmod(0o644)
    return ["-v", f"{tls}:/etc/dra-bridge/tls:ro", "-v", f"{policy}:/etc/dra-bridge/policy:ro",
            "-v", f"{account}:{SA}:ro", "--tmpfs", "/tmp"]


def test_the_built_image_serves_migrates_and_drains(cluster, webhook, image, tmp_path):
    config = json.loads(subprocess.run([ENGINE, "image", "inspect", image], capture_output=True, text=True,
                                       check=True).stdout)[0]["Config"]
    assert config["User"] == "65532:65532" and config["Entrypoint"] == ["dra-bridge"]
    port, health = free_port(), free_port()
    args = [a for a in deployment_args(cluster) if not a.startswith(("--port=", "--health-port="))]
    args += [f"--port={port}", f"--health-port={health}", "--host=127.0.0.1", "--drain-seconds=5"]
    host, api_port = cluster.server.removeprefix("https://").rsplit(":", 1)
    name = f"dra-bridge-e2e-{port}"
    run = subprocess.run(
        [ENGINE, "run", "-d", "--name", name, "--runtime", "runc", "--network", "host", "--read-only",
         "--ulimit", f"nofile={FILES}:{FILES}", "--ulimit", "nproc=4096:4096", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
         "-e", f"KUBERNETES_SERVICE_HOST={host}", "-e", f"KUBERNETES_SERVICE_PORT={api_port}",
         "-e", f"POD_NAME={name}", "-e", "POD_NAMESPACE=dra-bridge",
         *mounts(cluster, webhook, tmp_path), image, *args], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    try:
        served = Webhook(cluster, bundle=webhook.bundle)
        served.port = port  # the replica in the container, reached as the API server reaches it

        def ready():
            if subprocess.run([ENGINE, "inspect", "-f", "{{.State.Running}}", name], capture_output=True,
                              text=True).stdout.strip() != "true":
                raise AssertionError(logs(name))
            try:
                return served.get("/readyz", timeout=2)[0] == 200
            except OSError:
                return False
        wait_for(ready, 90, "the image's webhook /readyz")
        cluster.apply(served.configurations())
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "from-the-image", "namespace": "team-a"},
               "spec": {"containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04",
                                        "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
        created = json.loads(cluster.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                                             input=json.dumps(pod)).stdout)
        assert created["spec"].get("resourceClaims"), logs(name)
        whoami = subprocess.run([ENGINE, "exec", name, "python", "-c",
                                 "import os, pathlib; print(os.getuid());"
                                 "pathlib.Path('/opt/dra-bridge/x').touch()"], capture_output=True, text=True)
        assert whoami.stdout.strip() == "65532" and "Read-only file system" in whoami.stderr
        started = time.monotonic()
        subprocess.run([ENGINE, "stop", "-t", "30", name], capture_output=True, check=True)
        stopped = time.monotonic() - started
        state = json.loads(subprocess.run([ENGINE, "inspect", name], capture_output=True, text=True).stdout)[0]
        text = logs(name)
        assert state["State"]["ExitCode"] == 0, text[-3000:]
        assert "SIGTERM: draining" in text and "drained and stopped" in text, text[-3000:]
        assert stopped < 10, (stopped, text[-2000:])
    finally:
        cluster.apply(webhook.configurations())
        subprocess.run([ENGINE, "rm", "-f", name], capture_output=True)


def logs(name: str) -> str:
    found = subprocess.run([ENGINE, "logs", name], capture_output=True, text=True)
    return found.stdout + found.stderr
