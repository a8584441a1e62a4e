"""Latency of /mutate for a realistic GPU pod vs an echo endpoint, same server, same run.

Open loop at a fixed rate over TLS with keep-alive connections; one uvicorn worker.
Prints median and p99 per endpoint and the ratio mutate/echo. Usage:
    python bench/mutate.py [--rate 500] [--seconds 10]
"""

import argparse
import pathlib
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import orjson
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._server import running  # noqa: E402

POD = yaml.safe_load("""
apiVersion: v1
kind: Pod
metadata:
  name: trainer-7d9f
  namespace: ml
  labels: {app: trainer, team: research}
spec:
  nodeSelector: {nvidia.com/gpu.family: hopper, kubernetes.io/os: linux}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  initContainers:
  - name: fetch
    image: busybox
    command: [sh, -c, "cp -r /src /data"]
  containers:
  - name: trainer
    image: nvcr.io/nvidia/pytorch:24.05-py3
    command: [torchrun, --nproc-per-node=4, train.py]
    env: [{name: NCCL_DEBUG, value: INFO}, {name: EPOCHS, value: "10"}]
    resources:
      limits: {nvidia.com/gpu: 4, cpu: "16", memory: 128Gi}
      requests: {nvidia.com/gpu: 4, cpu: "8", memory: 64Gi}
    volumeMounts: [{name: data, mountPath: /data}, {name: shm, mountPath: /dev/shm}]
  - name: exporter
    image: prom/node-exporter
    resources: {limits: {cpu: 100m, memory: 64Mi}}
  volumes:
  - {name: data, emptyDir: {}}
  - {name: shm, emptyDir: {medium: Memory}}
""")


def review(uid: int) -> bytes:
    return orjson.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": f"bench-{uid}", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"}, "operation": "CREATE",
                    "namespace": "ml", "userInfo": {"username": "bench"}, "object": POD, "dryRun": False}})


def drive(url: str, ca: str, path: str, rate: float, seconds: float, workers: int = 16) -> tuple[list[float], int]:
    local = threading.local()
    context = ssl.create_default_context(cafile=ca)

    def client() -> httpx.Client:
        if not hasattr(local, "client"):
            local.client = httpx.Client(base_url=url, verify=context, timeout=10)
        return local.client

    bodies = [review(i) for i in range(256)]
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()

    def one(i: int, scheduled: float) -> None:
        try:
            r = client().post(path, content=bodies[i % len(bodies)])
            ok = r.status_code == 200
        except httpx.HTTPError:
            ok = False
        elapsed = time.perf_counter() - scheduled  # from the planned send time: queueing counts
        with lock:
            latencies.append(elapsed)
            if not ok:
                errors[0] += 1

    total = int(rate * seconds)
    with ThreadPoolExecutor(workers) as pool:
        start = time.perf_counter()
        for i in range(total):
            scheduled = start + i / rate
            delay = scheduled - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            pool.submit(one, i, scheduled)
    return latencies, errors[0]


def drive_hey(hey: str, url: str, path: str, rate: float, seconds: float, workers: int = 10):
    """hey (Go) as the load generator: leaves more of the 2 cores to the server than Python does."""
    total = int(rate * seconds)
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as body:
        body.write(review(0))
    out = subprocess.run([hey, "-n", str(total), "-c", str(workers), "-q", str(rate / workers), "-m", "POST",
                          "-T", "application/json", "-D", body.name, "-o", "csv", url + path],
                         capture_output=True, text=True, check=True).stdout
    latencies, errors = [], 0
    for line in out.splitlines()[1:]:
        fields = line.split(",")
        latencies.append(float(fields[0]))
        errors += fields[6] != "200"
    return latencies, errors


def summary(latencies: list[float]) -> tuple[float, float]:
    ordered = sorted(latencies)
    return statistics.median(ordered) * 1e3, ordered[int(len(ordered) * 0.99) - 1] * 1e3


def planner_cost(n: int = 2000) -> tuple[float, float]:
    """In-process CPU per review (parse + plan + patch + reply): cold (every pod new) vs cached."""
    from app.policy import default_policy
    from app.server import admission, mutation

    policy = default_policy()
    bodies = []
    for i in range(n):
        pod = dict(POD, spec=dict(POD["spec"], priority=i))  # distinct shape: a cache miss each
        bodies.append(orjson.dumps({**orjson.loads(review(i)), "request": {
            **orjson.loads(review(i))["request"], "object": pod}}))
    timings = []
    for cache in (mutation.PlanCache(size=n + 1), None):
        started = time.perf_counter()
        for i in range(n):
            req = admission.parse_review(bodies[i] if cache is not None else bodies[0])
            mp = mutation.plan_request(req, policy, {}, cache or mutation._DEFAULT_CACHE)
            orjson.dumps(mutation.respond(req, mp))
        timings.append((time.perf_counter() - started) / n * 1e6)
    return timings[0], timings[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=500)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--generator", choices=["auto", "hey", "python"], default="auto")
    args = parser.parse_args()
    hey = shutil.which("hey") if args.generator in ("auto", "hey") else None
    if args.generator == "hey" and hey is None:
        parser.error("hey is not installed (apt-get install hey)")
    with running() as (url, ca, _proc):
        drive(url, ca, "/mutate", args.rate, 1)  # warm up both paths and connections
        drive(url, ca, "/echo", args.rate, 1)
        results = {}
        # Interleave rounds so drift in machine load hits both endpoints alike.
        for _round in range(2):
            for path in ("/echo", "/mutate"):
                if hey:
                    lat, err = drive_hey(hey, url, path, args.rate, args.seconds / 2)
                else:
                    lat, err = drive(url, ca, path, args.rate, args.seconds / 2)
                results.setdefault(path, ([], [0]))
                results[path][0].extend(lat)
                results[path][1][0] += err
        print(f"rate {args.rate:.0f} req/s, {args.seconds:.0f}s per endpoint, one uvicorn worker, TLS, keep-alive, "
              f"generator {'hey' if hey else 'python threads'}")
        rows = {}
        for path in ("/echo", "/mutate"):
            lat, err = results[path]
            rows[path] = summary(lat)
            print(f"{path:8s} n={len(lat):6d} errors={err[0]:3d} median={rows[path][0]:6.2f} ms p99={rows[path][1]:6.2f} ms")
        cold, warm = planner_cost()
        print(f"planner CPU per review in-process: cold {cold:.0f} us, cached shape {warm:.0f} us")
        print(f"ratio mutate/echo: median {rows['/mutate'][0] / rows['/echo'][0]:.2f}x, "
              f"p99 {rows['/mutate'][1] / rows['/echo'][1]:.2f}x")


if __name__ == "__main__":
    main()
