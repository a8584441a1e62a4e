"""Random inventories and claims shaped like what clusters publish (hypothesis strategies).

`case()` draws one case: nodes with labels (one without devices), DeviceClasses, pools of
ResourceSlices from several drivers (node-local, allNodes, nodeSelector, per-device node
selection by name, allNodes or selector), devices with int/bool/string/version and list-typed
attributes under qualified and unqualified names, capacities with request policies (range or
valid values), MIG-like partitions drawing on one or two counter sets, taints, binding
conditions, devices that allow multiple allocations (some already shared by allocated claims),
already-allocated devices, incomplete pools, stale generations and invalid pools (duplicate
device names, unknown counter sets); and one claim with counts (beyond 32 too), All,
firstAvailable with up to five subrequests, matchAttribute / distinctAttribute over requests or
subrequests (an empty constraint now and then), tolerations, capacity requests and adminAccess.
Each case records the features it uses (`features_used`), to read a disagreement by.
"""

from __future__ import annotations

from hypothesis import strategies as st

DRIVERS = ("gpu.example.com", "nic.example.com")
NODES = ("node-0", "node-1", "node-2")
REGIONS = {"node-0": "r1", "node-1": "r1", "node-2": "r2", "node-3": "r3"}  # node-3: no devices of its own
MEMORY = ("8Gi", "16Gi", "40Gi", "80Gi")
MODELS = ("a100", "h100", "l4")
VERSIONS = ("1.0.0", "1.2.0", "2.0.0")

# Attribute kinds: (name, value strategy key); qualified names carry another domain.
SCALAR_ATTRIBUTES = (("model", "string"), ("index", "int"), ("healthy", "bool"), ("numa", "int"))
QUALIFIED_ATTRIBUTES = (("resource.kubernetes.io/pcieRoot", "string"),)
VERSION_ATTRIBUTES = (("driverVersion", "version"),)
LIST_ATTRIBUTES = (("tags", "strings"), ("numas", "ints"))

SELECTORS = (
    "device.attributes['{d}'].model == 'h100'",
    "device.attributes['{d}'].model.startsWith('a')",
    "'numa' in device.attributes['{d}'] && device.attributes['{d}'].numa == 0",
    "device.capacity['{d}'].memory.compareTo(quantity('40Gi')) >= 0",
    "device.attributes['{d}'].healthy",
    "device.attributes['{d}'].index < 2",
    "device.driver == '{d}'",
)
VERSION_SELECTORS = ("device.attributes['{d}'].driverVersion.isGreaterThan(semver('1.1.0'))",)


def _one_in(draw, n: int) -> bool:
    """True about once in n draws: hypothesis favours the ends of a range, so not at 0."""
    return draw(st.integers(0, n - 1)) == n // 2


def _value(draw, kind):
    if kind == "string":
        return {"string": draw(st.sampled_from(MODELS))}
    if kind == "int":
        return {"int": draw(st.integers(0, 2))}
    if kind == "bool":
        return {"bool": draw(st.booleans())}
    if kind == "version":
        return {"version": draw(st.sampled_from(VERSIONS))}
    if kind == "strings":
        return {"strings": draw(st.lists(st.sampled_from(MODELS), min_size=1, max_size=2, unique=True))}
    return {"ints": draw(st.lists(st.integers(0, 2), min_size=1, max_size=2, unique=True))}


@st.composite
def _device(draw, name, used, lists):
    kinds = list(SCALAR_ATTRIBUTES) + list(QUALIFIED_ATTRIBUTES) + list(VERSION_ATTRIBUTES)
    if lists:
        kinds += list(LIST_ATTRIBUTES)
    chosen = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=4, unique=True))
    attributes = {}
    for attr, kind in chosen:
        attributes[attr] = _value(draw, kind)
        if kind in ("strings", "ints"):
            used.add("list-attributes")
    device = {"name": name, "attributes": attributes}
    if draw(st.booleans()):
        device["capacity"] = {"memory": {"value": draw(st.sampled_from(MEMORY))}}
    if draw(st.integers(0, 5)) == 0:
        device["taints"] = [{"key": "example.com/unhealthy", "value": draw(st.sampled_from(("xid", "ecc"))),
                             "effect": draw(st.sampled_from(("NoSchedule", "NoExecute", "None")))}]
        used.add("taints")
    if draw(st.integers(0, 6)) == 0:
        device["allowMultipleAllocations"] = True
        policy = draw(st.sampled_from((
            {"default": "10Gi", "validRange": {"min": "10Gi", "step": "10Gi"}},
            {"default": "20Gi", "validValues": ["10Gi", "20Gi", "40Gi"]},
            {"default": "10Gi", "validRange": {"min": "5Gi", "max": "40Gi"}},
            None)))
        device.setdefault("capacity", {})["memory"] = {"value": "80Gi", **({"requestPolicy": policy} if policy else {})}
        used.add("multiple-allocations")
    if _one_in(draw, 15):
        device["bindingConditions"] = ["example.com/attached"]
        device["bindingFailureConditions"] = ["example.com/failed"]
        used.add("binding-conditions")
    return device


@st.composite
def _pool(draw, index, used, lists):
    driver = draw(st.sampled_from(DRIVERS))
    name = f"pool-{index}"
    where = draw(st.sampled_from(["node", "node", "all", "selector", "per-device"]))
    spec = {"driver": driver, "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}}
    if where == "node":
        spec["nodeName"] = draw(st.sampled_from(NODES))
    elif where == "all":
        spec["allNodes"] = True
    elif where == "selector":
        spec["nodeSelector"] = _region_selector(draw(st.sampled_from(("r1", "r2"))))
        used.add("node-selector")
    else:
        spec["perDeviceNodeSelection"] = True
        used.add("node-selector")
    partitioned = draw(st.integers(0, 3)) == 0
    count = draw(st.integers(1, 4))
    devices = [draw(_device(f"dev-{i}", used, lists)) for i in range(count)]
    if where == "per-device":
        for device in devices:
            placement = draw(st.sampled_from(("name", "name", "all", "selector")))
            if placement == "name":
                device["nodeName"] = draw(st.sampled_from(NODES))
            elif placement == "all":
                device["allNodes"] = True
            else:
                device["nodeSelector"] = _region_selector(draw(st.sampled_from(("r1", "r2"))))
    if _one_in(draw, 40):
        devices.append(dict(devices[0]))  # a duplicate device name: the pool is invalid
        used.add("invalid-pool")
    slices = [{"metadata": {"name": f"{name}-slice-0"}, "spec": {**spec, "devices": devices}}]
    if partitioned:
        # A MIG-like GPU: a whole device and halves, drawing on one or two counter sets.
        used.add("shared-counters")
        spec["pool"]["resourceSliceCount"] = 2
        total = draw(st.sampled_from(("40Gi", "80Gi")))
        two_sets = draw(st.booleans())
        for device in devices:
            uses = [{"counterSet": "gpu-0", "counters": {
                "memory": {"value": draw(st.sampled_from(("20Gi", "40Gi", "80Gi")))}}}]
            if two_sets and draw(st.booleans()):
                uses.append({"counterSet": "gpu-1", "counters": {"slices": {"value": draw(st.sampled_from(("1", "2")))}}})
            if _one_in(draw, 50):
                uses.append({"counterSet": "missing", "counters": {"memory": {"value": "1Gi"}}})
                used.add("invalid-pool")
            device["consumesCounters"] = uses
        counter_sets = [{"name": "gpu-0", "counters": {"memory": {"value": total}}}]
        if two_sets:
            counter_sets.append({"name": "gpu-1", "counters": {"slices": {"value": "3"}}})
        counters = {k: v for k, v in spec.items() if k != "devices"}
        slices.append({"metadata": {"name": f"{name}-counters"}, "spec": {**counters, "sharedCounters": counter_sets}})
    state = draw(st.integers(0, 30))
    if state == 15:
        spec["pool"]["resourceSliceCount"] += 1  # a slice still missing: the pool is incomplete
        used.add("incomplete-pool")
    elif state == 16:
        stale = {**slices[0]["spec"], "pool": {**spec["pool"], "generation": 0}}
        slices.append({"metadata": {"name": f"{name}-old"}, "spec": {**stale, "devices": [dict(devices[0])]}})
        used.add("stale-generation")
    return slices


def guarded(expression: str) -> str:
    """An expression whose attribute or capacity lookups are guarded by `in` (already concrete)."""
    for domain in ("gpu.example.com", "nic.example.com"):
        if f"['{domain}']" in expression:
            return _guarded(expression.replace(f"['{domain}']", "['{d}']")).format(d=domain)
    return expression


def _guarded(template: str) -> str:
    for kind in ("attributes", "capacity"):
        marker = f"device.{kind}['{{d}}']."
        if marker in template and " in device." not in template:
            name = template.split(marker, 1)[1].split(".", 1)[0].split(" ", 1)[0]
            return f"'{name}' in device.{kind}['{{d}}'] && {template}"
    return template


def _region_selector(region):
    return {"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": [region]}]}]}


def _classes():
    out = [{"metadata": {"name": d.split(".")[0]},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{d}'"}}]}} for d in DRIVERS]
    out.append({"metadata": {"name": "big-gpu"}, "spec": {"selectors": [{"cel": {"expression": (
        "device.driver == 'gpu.example.com' && 'memory' in device.capacity['gpu.example.com'] && "
        "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0")}}]}})
    return out


@st.composite
def _exact(draw, used):
    cls = draw(st.sampled_from(("gpu", "nic", "big-gpu")))
    domain = "nic.example.com" if cls == "nic" else "gpu.example.com"
    out = {"deviceClassName": cls}
    if draw(st.integers(0, 6)) == 0:
        out["allocationMode"] = "All"
        used.add("all")
    else:
        out["count"] = draw(st.integers(30, 40)) if _one_in(draw, 60) else draw(st.integers(1, 2))
    templates = SELECTORS + VERSION_SELECTORS
    selectors = draw(st.lists(st.sampled_from(templates), max_size=2, unique=True))
    if draw(st.integers(0, 3)) > 0:
        # A lookup of an attribute the device lacks is a runtime error that stops upstream's
        # search on that node: most selectors guard their lookups, some do not.
        selectors = [_guarded(s) for s in selectors]
    elif selectors:
        used.add("unguarded-selectors")
    if selectors:
        out["selectors"] = [{"cel": {"expression": s.format(d=domain)}} for s in selectors]
    if draw(st.integers(0, 4)) == 0:
        out["tolerations"] = [draw(st.sampled_from((
            {"key": "example.com/unhealthy", "operator": "Exists"},
            {"key": "example.com/unhealthy", "operator": "Equal", "value": "xid", "effect": "NoExecute"},
            {"operator": "Exists", "effect": "NoSchedule"})))]
        used.add("taints")
    if draw(st.integers(0, 4)) == 0:
        name = "memory" if draw(st.integers(0, 5)) else "compute"  # a capacity devices may lack
        out["capacity"] = {"requests": {name: draw(st.sampled_from(("7Gi", "10Gi", "15Gi", "20Gi", "40Gi")))}}
        used.add("capacity-requests")
    if draw(st.integers(0, 8)) == 0:
        out["adminAccess"] = True
        used.add("admin-access")
    return out


@st.composite
def _claim(draw, used):
    requests, targets = [], []
    for i in range(draw(st.integers(1, 3)) if draw(st.booleans()) else 1):
        if draw(st.integers(0, 3)) == 0:
            subs = [{"name": f"sub-{j}", **draw(_exact(used))} for j in range(draw(st.integers(2, 5)))]
            requests.append({"name": f"req-{i}", "firstAvailable": subs})
            targets += [f"req-{i}"] + [f"req-{i}/{s['name']}" for s in subs]
            used.add("first-available")
        else:
            requests.append({"name": f"req-{i}", "exactly": draw(_exact(used))})
            targets.append(f"req-{i}")
    constraints = []
    attributes = ["gpu.example.com/model", "gpu.example.com/numa", "gpu.example.com/healthy",
                  "resource.kubernetes.io/pcieRoot", "gpu.example.com/driverVersion", "gpu.example.com/tags",
                  "nic.example.com/model"]
    for _ in range(draw(st.sampled_from((0, 0, 1, 1, 2, 3)))):
        if _one_in(draw, 80):
            constraints.append({})  # an empty constraint: upstream refuses the claim
            used.add("empty-constraint")
            continue
        kind = draw(st.sampled_from(("matchAttribute", "distinctAttribute")))
        attribute = draw(st.sampled_from(attributes))
        subset = draw(st.lists(st.sampled_from(targets), unique=True, max_size=len(targets)))
        constraint = {kind: attribute}
        if subset:
            constraint["requests"] = subset
            if any("/" in t for t in subset):
                used.add("subrequest-constraint")
        constraints.append(constraint)
        used.add(kind)
    devices = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {"metadata": {"name": "claim", "namespace": "default", "uid": "uid-claim"}, "spec": {"devices": devices}}


def _share(driver, pool, device, amount):
    """An allocated claim holding one share of a device that allows multiple allocations."""
    result = {"request": "r", "driver": driver, "pool": pool, "device": device, "shareID": f"share-{device}-{amount}",
              "consumedCapacity": {"memory": amount}}
    return {"metadata": {"name": f"holder-{pool}-{device}-{amount}", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
            "status": {"allocation": {"devices": {"results": [result]}}}}


@st.composite
def case(draw):
    used: set[str] = set()
    slices = []
    lists = draw(st.integers(0, 5)) == 0  # alpha in 1.37: few clusters publish them
    for index in range(draw(st.integers(1, 5))):
        slices.extend(draw(_pool(index, used, lists)))
    all_devices = [(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"], bool(d.get("allowMultipleAllocations")))
                   for s in slices for d in s["spec"].get("devices") or []]
    whole = sorted({d[:3] for d in all_devices if not d[3]})
    allocated = draw(st.lists(st.sampled_from(whole), unique=True, max_size=2)) if whole else []
    if allocated:
        used.add("allocated")
    shareable = sorted({d[:3] for d in all_devices if d[3]})
    holders = [_share(*d, draw(st.sampled_from(("10Gi", "30Gi", "70Gi")))) for d in shareable if draw(st.booleans())]
    if holders:
        used.add("shared-allocated")
    nodes = [{"metadata": {"name": n, "labels": {"region": REGIONS[n]}}} for n in NODES + ("node-3",)]
    return {"nodes": nodes, "classes": _classes(), "slices": slices, "claims": [draw(_claim(used))],
            "allocated": [{"driver": d, "pool": p, "device": n} for d, p, n in allocated],
            "allocated_claims": holders, "node": nodes[0], "features_used": sorted(used)}
