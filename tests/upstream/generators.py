"""Random inventories and claims shaped like what clusters publish (hypothesis strategies).

`case(profile)` draws one case: nodes with labels, DeviceClasses, pools of ResourceSlices from
several drivers (node-local, allNodes, nodeSelector, per-device node selection), devices with
int/bool/string/version and list-typed attributes under qualified and unqualified names,
capacities, MIG-like partitions drawing on shared counters, taints, devices that allow multiple
allocations, already-allocated devices, and one claim with counts, All, firstAvailable,
matchAttribute, distinctAttribute, tolerations, capacity requests and adminAccess.

`profile` "modelled" keeps to what our validator claims to model today; "full" draws everything.
Each case records the features it uses, so a disagreement can be put down to a known gap.
"""

from __future__ import annotations

from hypothesis import strategies as st

DRIVERS = ("gpu.example.com", "nic.example.com")
NODES = ("node-0", "node-1", "node-2")
REGIONS = {"node-0": "r1", "node-1": "r1", "node-2": "r2"}
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
def _device(draw, name, profile, used, lists):
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
    if profile == "full" and draw(st.integers(0, 6)) == 0:
        device["allowMultipleAllocations"] = True
        device.setdefault("capacity", {})["memory"] = {
            "value": "80Gi", "requestPolicy": {"default": "10Gi", "validRange": {"min": "10Gi", "step": "10Gi"}}}
        used.add("multiple-allocations")
    return device


@st.composite
def _pool(draw, index, profile, used, lists):
    driver = draw(st.sampled_from(DRIVERS))
    name = f"pool-{index}"
    where_options = ["node", "node", "all"]
    if profile == "full":
        where_options += ["selector", "per-device"]
    where = draw(st.sampled_from(where_options))
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
    partitioned = profile == "full" and draw(st.integers(0, 3)) == 0
    count = draw(st.integers(1, 3))
    devices = [draw(_device(f"dev-{i}", profile, used, lists)) for i in range(count)]
    if where == "per-device":
        for device in devices:
            device["nodeName"] = draw(st.sampled_from(NODES))
    slices = [{"metadata": {"name": f"{name}-slice-0"}, "spec": {**spec, "devices": devices}}]
    if partitioned:
        # A MIG-like GPU: a whole device and halves, all drawing on one counter set.
        used.add("shared-counters")
        spec["pool"]["resourceSliceCount"] = 2
        total = draw(st.sampled_from(("40Gi", "80Gi")))
        for device in devices:
            device["consumesCounters"] = [{"counterSet": "gpu-0", "counters": {
                "memory": {"value": draw(st.sampled_from(("20Gi", "40Gi", "80Gi")))}}}]
        counters = {k: v for k, v in spec.items() if k != "devices"}
        slices.append({"metadata": {"name": f"{name}-counters"},
                       "spec": {**counters, "sharedCounters": [{"name": "gpu-0", "counters": {
                           "memory": {"value": total}}}]}})
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
def _exact(draw, profile, used):
    cls = draw(st.sampled_from(("gpu", "nic", "big-gpu")))
    domain = "nic.example.com" if cls == "nic" else "gpu.example.com"
    out = {"deviceClassName": cls}
    if draw(st.integers(0, 4)) == 0:
        out["allocationMode"] = "All"
        used.add("all")
    else:
        out["count"] = draw(st.integers(1, 3))
    templates = SELECTORS + VERSION_SELECTORS
    selectors = draw(st.lists(st.sampled_from(templates), max_size=2, unique=True))
    if profile == "modelled" or draw(st.integers(0, 3)) > 0:
        # A lookup of an attribute the device lacks is a runtime error: upstream aborts, we say
        # "no match" (a known gap); modelled cases always guard their lookups, others mostly.
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
    if profile == "full" and draw(st.integers(0, 4)) == 0:
        out["capacity"] = {"requests": {"memory": draw(st.sampled_from(("10Gi", "20Gi", "40Gi")))}}
        used.add("capacity-requests")
    if profile == "full" and draw(st.integers(0, 8)) == 0:
        out["adminAccess"] = True
        used.add("admin-access")
    return out


@st.composite
def _claim(draw, profile, used):
    requests = []
    for i in range(draw(st.integers(1, 3))):
        if draw(st.integers(0, 3)) == 0:
            subs = [{"name": f"sub-{j}", **draw(_exact(profile, used))} for j in range(2)]
            requests.append({"name": f"req-{i}", "firstAvailable": subs})
            used.add("first-available")
        else:
            requests.append({"name": f"req-{i}", "exactly": draw(_exact(profile, used))})
    constraints = []
    names = [r["name"] for r in requests]
    uses_all = any("allocationMode" in str(r) for r in requests)
    attributes = ["gpu.example.com/model", "gpu.example.com/numa", "gpu.example.com/healthy",
                  "resource.kubernetes.io/pcieRoot", "gpu.example.com/driverVersion"]
    if profile == "full":
        attributes.append("gpu.example.com/tags")
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from(("matchAttribute", "distinctAttribute")))
        attribute = draw(st.sampled_from(attributes))
        if profile == "modelled" and (kind == "distinctAttribute" or attribute.endswith("driverVersion") or uses_all):
            continue  # All with a constraint that excludes a device is an error upstream, not modelled
        subset = draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names)))
        constraint = {kind: attribute}
        if subset:
            constraint["requests"] = subset
        constraints.append(constraint)
        used.add(kind)
        if attribute.endswith("driverVersion") and kind == "matchAttribute":
            used.add("version-match")
    devices = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {"metadata": {"name": "claim", "namespace": "default", "uid": "uid-claim"}, "spec": {"devices": devices}}


@st.composite
def case(draw, profile: str = "full"):
    used: set[str] = set()
    slices = []
    lists = profile == "full" and draw(st.integers(0, 5)) == 0  # alpha in 1.37: few clusters publish them
    for index in range(draw(st.integers(1, 4))):
        slices.extend(draw(_pool(index, profile, used, lists)))
    all_devices = [(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"])
                   for s in slices for d in s["spec"].get("devices") or []]
    allocated = draw(st.lists(st.sampled_from(all_devices), unique=True, max_size=2)) if all_devices else []
    if allocated:
        used.add("allocated")
    nodes = [{"metadata": {"name": n, "labels": {"region": REGIONS[n]}}} for n in NODES]
    return {"nodes": nodes, "classes": _classes(), "slices": slices, "claims": [draw(_claim(profile, used))],
            "allocated": [{"driver": d, "pool": p, "device": n} for d, p, n in allocated],
            "node": nodes[0], "features_used": sorted(used)}
