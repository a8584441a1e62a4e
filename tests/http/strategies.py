"""Hypothesis strategies for hostile and malformed admission traffic (used by tests and bench/fuzz.py)."""

import json

from hypothesis import strategies as st

QUANTITIES = ["1", "0", "1e9", "-1", "0.5", "2Ki", "1.5Gi", "+3", "", " ", "9" * 40, "1e999", "NaN", "0x10",
              "１", "1 Gi", "½", None, True, [], {}, 3.5, -2, 10**30]
NAMES = st.one_of(st.text(min_size=0, max_size=80), st.sampled_from(["main", "gpu", "Ünïcødé", "a" * 300, "", "-"]))
RESOURCE_KEYS = st.sampled_from(["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/gpumem", "nvidia.com/gpucores",
                                 "nvidia.com/gpu.shared", "volcano.sh/vgpu-number", "kubernetes.io/gpu",
                                 "nvidia.com/whatever", "cpu", "memory"])
JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                       max_leaves=20)


@st.composite
def containers(draw):
    out = []
    for _ in range(draw(st.integers(0, 4))):
        limits = draw(st.dictionaries(RESOURCE_KEYS, st.sampled_from(QUANTITIES), max_size=4))
        c = {"name": draw(NAMES), "image": "img"}
        if draw(st.booleans()):
            c["resources"] = {"limits": limits}
            if draw(st.booleans()):
                c["resources"]["requests"] = draw(st.dictionaries(RESOURCE_KEYS, st.sampled_from(QUANTITIES), max_size=3))
        elif draw(st.booleans()):
            c["resources"] = draw(JSONISH)
        out.append(c)
    return out


@st.composite
def pods(draw):
    spec = {"containers": draw(containers())}
    if draw(st.booleans()):
        spec["initContainers"] = draw(containers())
    if draw(st.booleans()):
        spec["nodeSelector"] = draw(st.dictionaries(st.sampled_from(["nvidia.com/gpu.product", "nvidia.com/gpu.memory",
                                                                      "nvidia.com/gpu.family", "zone"]),
                                                    st.text(max_size=30), max_size=3))
    if draw(st.booleans()):
        spec["affinity"] = draw(st.one_of(JSONISH, st.just({"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "nvidia.com/gpu.memory", "operator": draw(st.sampled_from(["In", "Gt", "Lt", "Bogus", "Exists"])),
                 "values": draw(st.lists(st.text(max_size=8), max_size=3))}]}]}}})))
    if draw(st.booleans()):
        spec = draw(st.one_of(st.just(spec), JSONISH))
    meta = {"name": draw(NAMES)}
    if draw(st.booleans()):
        meta["annotations"] = draw(st.dictionaries(st.sampled_from(["nvidia.com/use-gputype", "nvidia.com/use-gpuuuid",
                                                                     "x"]), st.text(max_size=50), max_size=2))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


@st.composite
def claims(draw):
    exprs = st.sampled_from(["device.driver == 'gpu.nvidia.com'", "device.attributes[", "nosuch()", "1 + 'a'",
                             "[" + ",".join(str(i) for i in range(200)) + "].exists(a, [" +
                             ",".join(str(i) for i in range(200)) + "].exists(b, [1,2,3].exists(c, a == b)))",
                             "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('1e999')) > 0",
                             "'x' * 3", "device.attributes['gpu.nvidia.com'].missing"])
    requests = []
    for _ in range(draw(st.integers(0, 3))):
        exactly = {"deviceClassName": draw(st.sampled_from(["gpu.nvidia.com", "mig.nvidia.com", "", "nope"])),
                   "count": draw(st.sampled_from([1, 0, -1, 2, 10**9, "1", None])),
                   "allocationMode": draw(st.sampled_from(["ExactCount", "All", "Weird", None])),
                   "selectors": [{"cel": {"expression": draw(exprs)}} for _ in range(draw(st.integers(0, 2)))]}
        requests.append({"name": draw(NAMES), "exactly": exactly} if draw(st.booleans()) else draw(JSONISH))
    spec = {"devices": {"requests": requests}}
    return {"apiVersion": draw(st.sampled_from(["resource.k8s.io/v1", "resource.k8s.io/v1beta1", "v1", None])),
            "kind": "ResourceClaim", "metadata": {"name": draw(NAMES)}, "spec": draw(st.one_of(st.just(spec), JSONISH))}


@st.composite
def reviews(draw, objects):
    obj = draw(objects)
    request = {"uid": draw(st.one_of(st.uuids().map(str), st.sampled_from(["", None, 5, "ü" * 10]))),
               "kind": {"group": "", "version": "v1", "kind": obj.get("kind") if isinstance(obj, dict) else "Pod"},
               "operation": draw(st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT", 7])),
               "namespace": draw(st.one_of(st.text(max_size=20), st.none())),
               "object": obj, "dryRun": draw(st.sampled_from([False, True, "yes"]))}
    for key in draw(st.lists(st.sampled_from(list(request)), max_size=2)):
        request.pop(key, None)  # missing fields
    review = {"apiVersion": draw(st.sampled_from(["admission.k8s.io/v1"] * 4 + ["admission.k8s.io/v1beta1", "v1"])),
              "kind": draw(st.sampled_from(["AdmissionReview"] * 5 + ["Pod"])), "request": request}
    return json.dumps(review).encode()


RAW_BODIES = st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode),
                       JSONISH.map(lambda v: json.dumps(v).encode()),
                       st.integers(1, 200).map(lambda d: ("[" * d + "]" * d).encode()),
                       st.just(b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": ' +
                               b"[" * 5000 + b"]" * 5000 + b"}"))


# Structure-aware forgeries: a realistic object with one to three fields given the wrong shape.
WRONG = st.sampled_from([None, 0, -1, "", "x", [], {}, True, 10**20, 1.5, [1], ["a", None], {"a": 1}, {"": []}])


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


def _replace(value, path, new):
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


REALISTIC_POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "trainer", "namespace": "team-a", "labels": {"app": "t"},
                 "annotations": {"nvidia.com/use-gputype": "H100,A100"}},
    "spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
             "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                 {"matchExpressions": [{"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["40000"]}]}]}}},
             "initContainers": [{"name": "warm", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
             "containers": [{"name": "main", "image": "x", "resources": {
                 "limits": {"nvidia.com/gpu": 2, "cpu": "4"}, "requests": {"nvidia.com/gpu": 2}}},
                 {"name": "side", "image": "x", "resources": {"limits": {"nvidia.com/mig-1g.10gb": 1}}}]}}
REALISTIC_CLAIM = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "team-a"},
    "spec": {"devices": {
        "requests": [{"name": "gpus", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "count": 2, "allocationMode": "ExactCount",
            "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName.contains('H100')"}}],
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            "capacity": {"requests": {"memory": "10Gi"}}}},
            {"name": "alt", "firstAvailable": [{"name": "a", "deviceClassName": "mig.nvidia.com", "count": 1}]}],
        "constraints": [{"requests": ["gpus"], "matchAttribute": "gpu.nvidia.com/productName"}],
        "config": [{"requests": ["gpus"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {"a": 1}}}]}}}


@st.composite
def forged(draw, base):
    obj = base
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(obj) if p]
        obj = _replace(obj, draw(st.sampled_from(paths)), draw(WRONG))
    return obj


def forged_pods():
    return forged(REALISTIC_POD)


def forged_claims():
    return forged(REALISTIC_CLAIM)
