"""A fleet on KWOK nodes (issue 48): the e2e control plane with KWOK playing the kubelet of
--nodes fake GPU nodes, half on the device plugin (8 H100 advertised as nvidia.com/gpu), half on
DRA (the reporter's rendering of 8 H100, NVIDIA's schema), and --pods GPU pods the real scheduler
places and KWOK runs: Deployments of one-GPU pods, half asking nvidia.com/gpu (the device-plugin
half), half a ResourceClaimTemplate of one gpu.nvidia.com device (the DRA half).

Measures, in one run: the fleet's creation and the pods reaching Running; `rollout plan` against
it (wall time and peak RSS); `serve --inventory live` ready time and RSS; pod creates from
concurrent clients into a namespace our webhook serves (a rewrite per pod, dry run) beside the
same creates into one it does not (the baseline); then `rollout run` of the first wave end to
end, the fleet's namespace opted in (its evicted pods come back through the webhook), with
tests.e2e.kwok.GpuAgents playing the GPU Operator's two DaemonSets on the label flips.

Usage: python bench/kwok_fleet.py [--nodes 500] [--pods 3600] [--clients 8] [--creates 200] [--wave-size 25]
"""

import argparse
import json
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.reporter import render  # noqa: E402
from app.reporter.backends import FakeBackend  # noqa: E402
from bench.e2e_scale import post_all, rss_mb  # noqa: E402
from bench.validate import peak_rss_mb  # noqa: E402
from tests.e2e import kwok  # noqa: E402
from tests.e2e.burst import quantile  # noqa: E402
from tests.e2e.cluster import ControlPlane, build  # noqa: E402
from tests.e2e.conftest import INSTALLED_KINDS, NVIDIA_CLASSES, Webhook, rendered_manifests, wait_for  # noqa: E402

PLUGIN_LABEL, DRA_LABEL = "nvidia.com/gpu.deploy.device-plugin", "nvidia.com/dra-kubelet-plugin"  # rollout's
PLUGIN = {PLUGIN_LABEL: "true", "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
DRA = {DRA_LABEL: "true", "nvidia.com/gpu.present": "true"}


def gpu_pod(name: str, namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


ONE_GPU = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": "one-gpu", "namespace": "fleet"},
           "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}}


def deployment(i: int, replicas: int, dra: bool) -> dict:
    name = f"{'dra' if dra else 'plugin'}-{i:03d}"
    spec = {"containers": [{"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    if dra:
        spec = {"containers": [{"name": "c", "image": "cuda", "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "fleet"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}}, "spec": spec}}}


def running(plane: ControlPlane) -> int:
    pods = plane.json("pods", "-n", "fleet", "--field-selector=status.phase=Running")["items"]
    return len(pods)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=3600)  # room left for a wave on each side
    parser.add_argument("--wave-size", type=int, default=25)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--creates", type=int, default=200)
    args = parser.parse_args()
    binaries, kwok_binary = build(), kwok.build()
    gpus = FakeBackend(str(ROOT / "app" / "data" / "fake" / "h100x8.yaml")).read()
    with tempfile.TemporaryDirectory() as workdir:
        plane = ControlPlane(pathlib.Path(workdir), binaries).start()
        runner = kwok.Kwok(plane, kwok_binary).start()
        webhook = agents = None
        try:
            plane.apply([d for d in rendered_manifests(plane) if d["kind"] in INSTALLED_KINDS] + NVIDIA_CLASSES)
            plane.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": labels}}
                         for n, labels in (("fleet", {}), ("served", {"dra-bridge.io/migrate": "enabled"}),
                                           ("plain", {}))])
            half = args.nodes // 2
            started = time.monotonic()
            nodes = [kwok.fake_node(f"fl-{i:04d}", {"nvidia.com/gpu": "8"} if i < half else {},
                                    PLUGIN if i < half else DRA) for i in range(args.nodes)]
            post_all(plane, "/api/v1/nodes", [{k: v for k, v in n.items() if k != "status"} for n in nodes],
                     args.clients)
            for n in nodes:
                plane.kubectl("patch", "node", n["metadata"]["name"], "--subresource=status", "--type=merge",
                              "-p", json.dumps({"status": n["status"]}))
            slices = [s for n in nodes[half:] for s in render.slices(gpus, n["metadata"]["name"], "gpu.nvidia.com", 1)]
            post_all(plane, "/apis/resource.k8s.io/v1/resourceslices", slices, args.clients)
            print(f"fleet: {args.nodes} KWOK nodes ({half} device plugin, {args.nodes - half} DRA, "
                  f"{sum(len(s['spec']['devices']) for s in slices)} DRA GPUs) in {time.monotonic() - started:.0f}s")
            started = time.monotonic()
            per = 40
            plane.apply([ONE_GPU] + [deployment(i, per, dra=i % 2 == 1) for i in range(args.pods // per)])
            wait_for(lambda: running(plane) >= args.pods // per * per, 1800, "the fleet's pods Running", interval=5)
            print(f"{args.pods // per * per} GPU pods scheduled and Running (KWOK) in {time.monotonic() - started:.0f}s")

            started = time.monotonic()
            plan = subprocess.run([sys.executable, "-m", "app", "rollout", "plan", "-o", "json", "--wave-size",
                                   str(args.wave_size),
                                   "--kubeconfig", plane.admin_kubeconfig], capture_output=True, text=True, cwd=ROOT,
                                  timeout=1800)
            took = time.monotonic() - started
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            waves = json.loads(plan.stdout)["waves"] if plan.stdout.strip().startswith("{") else []
            print(f"rollout plan: exit {plan.returncode}, {len(waves)} waves, {took:.1f}s, peak RSS {peak:.0f} MB")

            webhook = Webhook(plane, "--log-level", "warning")
            started = time.monotonic()
            webhook.start()
            print(f"serve --inventory live: ready in {time.monotonic() - started:.1f}s, "
                  f"RSS {rss_mb(webhook.process.pid):.0f} MB")
            plane.apply(webhook.configurations())
            time.sleep(2)
            results = {}
            for ns in ("plain", "served", "plain", "served"):  # interleaved; server dry runs place nothing
                offset = len(results.get(ns, []))
                path = f"/api/v1/namespaces/{ns}/pods?dryRun=All"
                results.setdefault(ns, []).extend(post_all(
                    plane, path, [gpu_pod(f"p-{offset + i}", ns) for i in range(args.creates // 2)], args.clients))
            for ns, label in (("plain", "no webhook"), ("served", "dra-bridge /mutate + /validate")):
                latencies = results[ns]
                print(f"pod creates, {label}: {len(latencies)} from {args.clients} clients, median "
                      f"{quantile(latencies, 0.5) * 1000:.1f} ms, p99 {quantile(latencies, 0.99) * 1000:.1f} ms")
            ratio = quantile(results["served"], 0.5) / quantile(results["plain"], 0.5)
            print(f"median ratio served / no webhook: {ratio:.2f}; webhook RSS after: "
                  f"{rss_mb(webhook.process.pid):.0f} MB")
            agents = kwok.GpuAgents(plane, lambda node: {"nvidia.com/gpu": "8"},
                                    lambda node: plane.apply(render.slices(gpus, node, "gpu.nvidia.com", 1)),
                                    PLUGIN_LABEL, DRA_LABEL, interval_s=1.0).start()
            return first_wave(plane, args, webhook)
        finally:
            if agents:
                agents.stop()
                print(f"GPU agents: {agents.reactions} reactions, errors: {agents.errors[-3:] or 'none'}")
            if webhook:
                webhook.stop()
            runner.stop()
            plane.stop()


def first_wave(plane: ControlPlane, args, webhook) -> int:
    """`rollout run --wave 1` end to end; 0 when it succeeded and every pod of the fleet runs."""
    plane.kubectl("label", "namespace", "fleet", "dra-bridge.io/migrate=enabled")
    expected = args.pods // 40 * 40
    started = time.monotonic()
    run = subprocess.Popen([sys.executable, "-m", "app", "rollout", "run", "--wave", "1", "--wave-size",
                            str(args.wave_size), "--timeout", "1500", "--kubeconfig", plane.admin_kubeconfig],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    peak = 0.0
    while run.poll() is None:
        try:
            peak = max(peak, peak_rss_mb(pid=run.pid))
        except (OSError, StopIteration):
            pass  # it has just ended
        time.sleep(0.5)
    took, output = time.monotonic() - started, run.stdout.read()
    lines = output.strip().splitlines()
    print(f"rollout run --wave 1 ({args.wave_size} nodes): exit {run.returncode} in {took:.0f}s, peak RSS "
          f"{peak:.0f} MB; last lines:\n  " + "\n  ".join(lines[-4:]))
    pods = plane.json("pods", "-n", "fleet")["items"]
    phases: dict[str, int] = {}
    for pod in pods:
        phases[pod.get("status", {}).get("phase", "?")] = phases.get(pod.get("status", {}).get("phase", "?"), 0) + 1
    claims = [c for c in plane.json("resourceclaims", "-n", "fleet")["items"] if c.get("status", {}).get("allocation")]
    moved = [n for n in plane.json("nodes")["items"] if (n["metadata"].get("labels") or {}).get(DRA_LABEL) == "true"
             and (n["metadata"].get("labels") or {}).get(PLUGIN_LABEL) == "false"]
    print(f"after the wave: pods {phases} (expected {expected} Running); {len(claims)} claims allocated; "
          f"{len(moved)} nodes moved; webhook RSS {rss_mb(webhook.process.pid):.0f} MB")
    status = subprocess.run([sys.executable, "-m", "app", "rollout", "status",
                             "--kubeconfig", plane.admin_kubeconfig], capture_output=True, text=True, cwd=ROOT)
    print("rollout status:\n  " + "\n  ".join(line[:100] for line in status.stdout.strip().splitlines()[:6]))
    return 0 if run.returncode == 0 and phases.get("Running") == expected and len(moved) == args.wave_size else 1


if __name__ == "__main__":
    raise SystemExit(main())
