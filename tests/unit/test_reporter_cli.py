import subprocess
import sys

import yaml

from app.cli import load_inventory
from app.reporter import EXIT_NO_GPUS, EXIT_NO_LIBRARY, node_from_description, render
from tests.conftest import ROOT
from tests.kube.fakeapi import FakeKube, Fault

FAKE = ROOT / "app" / "data" / "fake"


def run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "app", "reporter", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, env=env)


def test_once_prints_slices_that_load_as_inventory(tmp_path):
    result = run("--once", "-o", "yaml", "--backend", f"fake:{FAKE / 'a100-mig.yaml'}", "--node-name", "n1")
    assert result.returncode == 0, result.stderr
    out = tmp_path / "slices.yaml"
    out.write_text(result.stdout)
    inv = load_inventory(str(out))
    assert len(inv.slices) == 1 and inv.device_count == 16
    # With NVIDIA's two classes the printout is a whole inventory: claims are judged, not refused
    # for a missing DeviceClass.
    assert set(inv.classes) == {"gpu.nvidia.com", "mig.nvidia.com"}
    from app import dra
    index = dra.build_index(inv)
    for device_class in inv.classes:
        claim = {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": device_class}}]}}
        assert dra.check(dra.parse_claim_spec(claim), index).status == "satisfiable", device_class


def test_no_nvml_library_is_one_clear_line_and_exit_code():
    result = run("--once", "--node-name", "n1", "--backend", "nvml")
    # This machine has no NVIDIA driver; on a GPU node this would print slices instead.
    if result.returncode == 0:
        return
    assert result.returncode == EXIT_NO_LIBRARY
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "libnvidia-ml.so" in result.stderr


def test_zero_gpus_and_bad_descriptions_have_their_own_exit_codes(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("driverVersion: '580.1'\ncudaDriverVersion: '13.0'\ngpus: []\n")
    assert run("--once", "--node-name", "n1", "--backend", f"fake:{empty}").returncode == EXIT_NO_GPUS
    bad = tmp_path / "bad.yaml"
    bad.write_text("driverVersion: '580.1'\ncudaDriverVersion: '13.0'\ngpus: [{index: 0}]\n")
    result = run("--once", "--node-name", "n1", "--backend", f"fake:{bad}")
    assert result.returncode == 2 and "gpus[0].uuid" in result.stderr


def test_node_name_is_required():
    result = run("--once", "--backend", f"fake:{FAKE / 'l4x4.yaml'}", env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 2 and "--node-name" in result.stderr


def test_publish_loop_against_fake_api_then_cleanup(tmp_path):
    fake = FakeKube().start()
    try:
        fake.add_cluster_object("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u1"}})
        result = run("--backend", f"fake:{FAKE / 'l4x4.yaml'}", "--node-name", "n1", "--mode", "shadow",
                     "--kubeconfig", fake.kubeconfig(tmp_path / "kc"), "--interval", "0.1", "--max-rounds", "3",
                     "--health-port", "0", "--cleanup-on-exit")
        assert result.returncode == 0, result.stderr
        created = [w for w in fake.writes() if w.method == "POST"]
        assert len(created) == 1
        assert created[0].body["spec"]["driver"] == "shadow.gpu.dra-bridge.io"
        assert "gpu.nvidia.com/productName" in created[0].body["spec"]["devices"][0]["attributes"]
        assert [w.method for w in fake.writes()] == ["POST", "DELETE"]  # rounds 2-3 changed nothing
    finally:
        fake.stop()


def test_bundled_example_inventory_is_the_reporters_rendering():
    inv = load_inventory(None)
    expected = []
    for node, fake in (("gpu-h100-0", "h100x8"), ("gpu-a100-0", "a100-mig"), ("gpu-l4-0", "l4x4")):
        desc = node_from_description(yaml.safe_load((FAKE / f"{fake}.yaml").read_text()), fake)
        expected += render.slices(desc, node, "gpu.nvidia.com", 1)
    assert inv.slices == expected
    assert set(inv.classes) == {"gpu.nvidia.com", "mig.nvidia.com"}


def test_health_and_metrics_endpoints_while_publishing(tmp_path):
    import signal
    import time

    import httpx

    from tests.http.server import free_port

    fake = FakeKube().start()
    fake.add_cluster_object("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u1"}})
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app", "reporter", "--backend", f"fake:{FAKE / 'h100x8.yaml'}",
                             "--node-name", "n1", "--kubeconfig", fake.kubeconfig(tmp_path / "kc"),
                             "--interval", "0.2", "--health-port", str(port)],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        else:
            raise AssertionError("reporter never became healthy")
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        assert 'dra_bridge_reporter_gpus{health="healthy"} 8.0' in metrics
        assert "dra_bridge_reporter_devices 8.0" in metrics
        assert "dra_bridge_reporter_publish_errors_total 0.0" in metrics
        fake.faults.append(Fault(status=500, times=1000))
        deadline = time.monotonic() + 15
        while httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 503
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        fake.stop()


def test_without_classes_and_partitionable_printouts(tmp_path):
    bare = run("--once", "--no-with-classes", "--backend", f"fake:{FAKE / 'l4x4.yaml'}", "--node-name", "n1")
    assert bare.returncode == 0 and {d["kind"] for d in yaml.safe_load_all(bare.stdout)} == {"ResourceSlice"}
    parts = run("--once", "--partitionable", "--backend", f"fake:{FAKE / 'a100-mig.yaml'}", "--node-name", "n1")
    docs = [d for d in yaml.safe_load_all(parts.stdout) if d["kind"] == "ResourceSlice"]
    assert parts.returncode == 0 and "sharedCounters" in docs[0]["spec"]
    shadow = run("--once", "--mode", "shadow", "--backend", f"fake:{FAKE / 'l4x4.yaml'}", "--node-name", "n1")
    classes = [d for d in yaml.safe_load_all(shadow.stdout) if d["kind"] == "DeviceClass"]
    # Shadow printouts are judged by NVIDIA's own classes (the validator maps the slices).
    assert {c["metadata"]["name"] for c in classes} == {"gpu.nvidia.com", "mig.nvidia.com"}
    out = tmp_path / "shadow.yaml"
    out.write_text(shadow.stdout)
    from app import dra
    claim = {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 4}}]}}
    assert dra.check(dra.parse_claim_spec(claim), dra.build_index(load_inventory(str(out)))).status == "satisfiable"


def test_publish_mode_refuses_beside_nvidias_own_plugin(tmp_path):
    fake = FakeKube().start()
    try:
        fake.add_cluster_object("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u1"}})
        fake.add_cluster_object("resourceslices", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpu.nvidia.com-x7k2q"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1,
                                                                           "resourceSliceCount": 1}, "devices": []}})
        args = ("--backend", f"fake:{FAKE / 'l4x4.yaml'}", "--node-name", "n1", "--kubeconfig",
                fake.kubeconfig(tmp_path / "kc"), "--max-rounds", "1", "--health-port", "0")
        refused = run(*args, "--mode", "publish")
        assert refused.returncode == 6
        [line] = refused.stderr.strip().splitlines()
        assert "n1-gpu.nvidia.com-x7k2q" in line and "--mode=shadow" in line
        assert not fake.writes()  # nothing written into the pool NVIDIA owns
        assert run(*args, "--mode", "shadow").returncode == 0  # beside it, shadow mode is fine
    finally:
        fake.stop()


def test_issue_25_run_by_hand_it_writes_shadow_slices_as_the_daemonset_does(tmp_path):
    """Publish slices beside the device plugin and the scheduler hands out GPUs the plugin also
    hands out: that is only ever asked for (--mode publish), never a default."""
    fake = FakeKube().start()
    try:
        fake.add_cluster_object("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u1"}})
        result = run("--backend", f"fake:{FAKE / 'l4x4.yaml'}", "--node-name", "n1", "--kubeconfig",
                     fake.kubeconfig(tmp_path / "kc"), "--max-rounds", "1", "--health-port", "0")
        assert result.returncode == 0, result.stderr
        drivers = {o["spec"]["driver"] for k, o in fake.objects.items() if k[1] == "resourceslices"}
        assert drivers == {"shadow.gpu.dra-bridge.io"}
    finally:
        fake.stop()
    # --once writes nothing: it prints what NVIDIA's driver would publish.
    printed = yaml.safe_load_all(run("--once", "--backend", f"fake:{FAKE / 'l4x4.yaml'}", "--node-name", "n1").stdout)
    assert {d["spec"]["driver"] for d in printed if d["kind"] == "ResourceSlice"} == {"gpu.nvidia.com"}
    assert "default: shadow (as the DaemonSet)" in " ".join(run("--help").stdout.split())


def _failing_gpu_file(tmp_path):
    description = yaml.safe_load((FAKE / "l4x4.yaml").read_text())
    description["gpus"][1] = {**description["gpus"][1], "healthy": False, "xid": 79}
    path = tmp_path / "failing.yaml"
    path.write_text(yaml.safe_dump(description))
    return path


def _published_once(tmp_path, fake):
    fake.add_cluster_object("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u1"}})
    result = run("--backend", f"fake:{_failing_gpu_file(tmp_path)}", "--node-name", "n1", "--mode", "publish",
                 "--kubeconfig", fake.kubeconfig(tmp_path / "kc"), "--interval", "0.1", "--max-rounds", "1",
                 "--health-port", "0")
    assert result.returncode == 0, result.stderr
    [stored] = [w.body for w in fake.writes() if w.method == "POST" and "resourceslices" in w.path]
    return result, [d["name"] for d in stored["spec"]["devices"]]


def test_the_running_reporter_learns_the_release_and_its_gates(tmp_path):
    """Issue 54: /version says which release; a dry run (nothing stored) says whether an admin
    turned device taints on there. Where they are off the failing GPU is left out."""
    as_134 = (("resourceslices", ("spec", "devices", "*", "taints")),
              ("resourceslices", ("spec", "devices", "*", "allowMultipleAllocations")),
              ("resourceslices", ("spec", "devices", "*", "capacity", "*", "requestPolicy")),
              ("deviceclasses", ("spec", "extendedResourceName")))
    fake = FakeKube(git_version="v1.34.4", drops=as_134).start()
    try:
        result, names = _published_once(tmp_path, fake)
        assert names == ["gpu-0", "gpu-2", "gpu-3"]
        assert "for Kubernetes 1.34.4 (the API server's /version)\n" in result.stderr  # its defaults hold
        assert "unhealthy GPUs are left out" in result.stderr
    finally:
        fake.stop()
    turned_on = FakeKube(git_version="v1.35.4").start()  # keeps taints: the admin turned the gate on
    try:
        result, names = _published_once(tmp_path, turned_on)
        assert names == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
        assert "a dry run shows" in result.stderr and "DRADeviceTaints=true" in result.stderr
    finally:
        turned_on.stop()
