"""Upstream's allocator table (k8s.io/dynamic-resource-allocation v0.37.2,
structured/internal/allocatortesting `testcases`), a selection transcribed as data with a few
builders of our own. Each case: its feature set as upstream runs it (`features`, None = none on),
classes, slices, allocated devices, the node, the claims, and upstream's expectation:
a list of per-claim results [(request, driver, pool, device), ...], "unsatisfiable", or
{"error": substring}.
"""

from __future__ import annotations

DRIVER_A, DRIVER_B = "driver-a", "driver-b"
CLASS_A, CLASS_B = "class-a", "class-b"
NODE_1, NODE_2 = "node-1", "node-2"
REGION_1, REGION_2 = "region-1", "region-2"
POOL_1, POOL_2 = "pool-1", "pool-2"
UNSATISFIABLE = "unsatisfiable"

INT_ATTR = f"{DRIVER_A}/numa"
VERSION_ATTR = f"{DRIVER_A}/driverVersion"
STRING_ATTR = f"{DRIVER_A}/stringAttribute"
BOOL_ATTR = f"{DRIVER_A}/boolAttribute"
MISSING_ATTR = f"{DRIVER_A}/NonExistentAttribute"

TAINT_NO_SCHEDULE = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}
TAINT_NO_EXECUTE = {"key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}
TAINT_NONE = {"key": "taint-key", "value": "taint-value", "effect": "None"}
TOLERATE_NO_EXECUTE = {"operator": "Equal", "key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}


# -- builders (plain resource.k8s.io/v1 JSON) ------------------------------------------------
def node(name, region):
    return {"metadata": {"name": name, "labels": {"region": region, "planet": "earth"}}}


def klass(name, driver, expression=None):
    return {"metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression or f'device.driver == "{driver}"'}}]}}


def region_selector(region):
    return {"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": [region]}]}]}


def device(name, capacity=None, attributes=None, **extra):
    out = {"name": name}
    if attributes:
        out["attributes"] = attributes
    if capacity:
        out["capacity"] = {k: ({"value": v} if isinstance(v, str) else v) for k, v in capacity.items()}
    out.update(extra)
    return out


def consumes(counter_set, **counters):
    return {"counterSet": counter_set, "counters": {k: {"value": v} for k, v in counters.items()}}


def counter_set(name, **counters):
    return {"name": name, "counters": {k: {"value": v} for k, v in counters.items()}}


def pool(name, count=1, generation=1):
    return {"name": name, "resourceSliceCount": count, "generation": generation}


def slice_(name, where, pool_, driver, devices=(), shared_counters=None):
    spec = {"driver": driver, "pool": pool_ if isinstance(pool_, dict) else pool(pool_)}
    if where == "all":
        spec["allNodes"] = True
    elif where == "per-device":
        spec["perDeviceNodeSelection"] = True
    elif isinstance(where, dict):
        spec["nodeSelector"] = where
    else:
        spec["nodeName"] = where
    if devices:
        spec["devices"] = list(devices)
    if shared_counters:
        spec["sharedCounters"] = shared_counters
    return {"metadata": {"name": name}, "spec": spec}


def exactly(cls, count=None, selectors=(), mode=None, admin=None, tolerations=None, capacity=None):
    out = {"deviceClassName": cls}
    if mode:
        out["allocationMode"] = mode
    if count is not None:
        out["count"] = count
    if selectors:
        out["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if admin is not None:
        out["adminAccess"] = admin
    if tolerations:
        out["tolerations"] = tolerations
    if capacity:
        out["capacity"] = {"requests": capacity}
    return out


def req(name, cls, count=None, **kw):
    return {"name": name, "exactly": exactly(cls, count, **kw)}


def first_available(name, *subs):
    return {"name": name, "firstAvailable": list(subs)}


def sub(name, cls, count=None, **kw):
    return {"name": name, **exactly(cls, count, **kw)}


def claim(name, *requests, constraints=None):
    devices = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": {"devices": devices}}


def case(name, claims, classes, slices, expect, features=None, allocated=(), at=None):
    return {"name": name, "features": features, "claims": claims, "classes": classes, "slices": slices,
            "allocated": [{"driver": d, "pool": p, "device": n} for d, p, n in allocated],
            "node": at or node(NODE_1, REGION_1), "expect": expect}


def one(slice_name, where, pool_, driver):
    return slice_(slice_name, where, pool_, driver, [device("device-1")])


def error(text):
    return {"error": text}


def memory_at_least(amount):
    return f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("{amount}")) >= 0'


CLASSES_A = [klass(CLASS_A, DRIVER_A)]
CLASSES_AB = [klass(CLASS_A, DRIVER_A), klass(CLASS_B, DRIVER_B)]
ALL_ON_MULTIPLE = [klass(CLASS_A, DRIVER_A,
                         f'device.driver == "{DRIVER_A}" && device.allowMultipleAllocations == true')]
RANGE_2_2_4 = {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}}

CASES = [
    case("simple", [claim("claim-0", req("req-0", CLASS_A))], CLASSES_A, [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
         [[("req-0", DRIVER_A, POOL_1, "device-1")]]),
    case("other-node", [claim("claim-0", req("req-0", CLASS_A))], CLASSES_A,
         [one("slice-1", NODE_1, POOL_1, DRIVER_B), one("slice-2", NODE_2, POOL_2, DRIVER_A)],
         [[("req-0", DRIVER_A, POOL_2, "device-1")]], at=node(NODE_2, REGION_2)),
    case("small-and-large",
         [claim("claim-0", req("req-0", CLASS_A, 1, selectors=[memory_at_least("1Gi")]),
                req("req-1", CLASS_A, 1, selectors=[memory_at_least("2Gi")]))], CLASSES_A,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, [device("device-1", {"memory": "1Gi"}),
                                                       device("device-2", {"memory": "2Gi"})])],
         [[("req-0", DRIVER_A, POOL_1, "device-1"), ("req-1", DRIVER_A, POOL_1, "device-2")]]),
    case("small-and-large-backtrack-requests",
         [claim("claim-0", req("req-0", CLASS_A, 1, selectors=[memory_at_least("1Gi")]),
                req("req-1", CLASS_A, 1, selectors=[memory_at_least("2Gi")]))], CLASSES_A,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, [device("device-2", {"memory": "2Gi"}),
                                                       device("device-1", {"memory": "1Gi"})])],
         [[("req-0", DRIVER_A, POOL_1, "device-1"), ("req-1", DRIVER_A, POOL_1, "device-2")]]),
    case("devices-split-across-different-slices",
         [claim("claim-0", req("req-0", CLASS_A, 2, mode="ExactCount"))], CLASSES_A,
         [one("slice-1", NODE_1, POOL_1, DRIVER_A), one("slice-2", NODE_1, POOL_2, DRIVER_A)],
         [[("req-0", DRIVER_A, POOL_1, "device-1"), ("req-0", DRIVER_A, POOL_2, "device-1")]]),
    case("obsolete-slice", [claim("claim-0", req("req-0", CLASS_A))], CLASSES_A,
         [slice_("slice-1-obsolete", NODE_1, pool(POOL_1, 2), DRIVER_A, [device("device-1")]),
          slice_("slice-1-obsolete", NODE_1, pool(POOL_1, 2, 2), DRIVER_A, [device("device-2")])],
         UNSATISFIABLE),
    case("duplicate-slice", [claim("claim-0", req("req-0", CLASS_A))], CLASSES_A,
         [slice_("slice-1", NODE_1, pool(POOL_1, 2), DRIVER_A, [device("device-1")]),
          slice_("slice-1-2", NODE_1, pool(POOL_1, 2), DRIVER_A, [device("device-1")])],
         error("invalid resource pools were encountered")),
    case("no-slices", [claim("claim-0", req("req-0", CLASS_A))], CLASSES_A, [], UNSATISFIABLE),
    case("no-classes", [claim("claim-0", req("req-0", CLASS_A))], [], [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
         error("could not retrieve device class class-a")),
    case("unknown-class", [claim("claim-0", req("req-0", "unknown-class"))], CLASSES_A,
         [one("slice-1", NODE_1, POOL_1, DRIVER_A)], error("could not retrieve device class unknown-class")),
    case("all-devices-single", [claim("claim-0", req("req-0", CLASS_A, mode="All"))], CLASSES_A,
         [one("slice-1", NODE_1, POOL_1, DRIVER_A)], [[("req-0", DRIVER_A, POOL_1, "device-1")]]),
    case("all-devices-with-consumed-counters", [claim("claim-0", req("req-0", CLASS_A, mode="All"))], CLASSES_A,
         [slice_("slice-1", NODE_1, pool(POOL_1, 2), DRIVER_A,
                 [device("device-1", consumesCounters=[consumes("counter-set-1", memory="4Gi")])]),
          slice_("slice-2", NODE_1, pool(POOL_1, 2), DRIVER_A,
                 shared_counters=[counter_set("counter-set-1", memory="8Gi")])],
         [[("req-0", DRIVER_A, POOL_1, "device-1")]], features={"PartitionableDevices": True}),
    case("all-devices-many", [claim("claim-0", req("req-0", CLASS_A, mode="All"))], CLASSES_A,
         [one("slice-1", NODE_1, POOL_1, DRIVER_A), one("slice-1", NODE_1, POOL_2, DRIVER_A)],
         [[("req-0", DRIVER_A, POOL_1, "device-1"), ("req-0", DRIVER_A, POOL_2, "device-1")]]),
    case("all-devices-of-the-incomplete-pool", [claim("claim-0", req("req-0", CLASS_A, 1, mode="All"))],
         CLASSES_A, [slice_("slice-1", NODE_1, pool(POOL_1, 2), DRIVER_A, [device("device-1")])],
         error("asks for all devices, but resource pool driver-a/pool-1 is currently being updated")),
    case("all-devices-slice-without-devices", [claim("claim-0", req("req-0", CLASS_A, mode="All"))], CLASSES_A,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A)], UNSATISFIABLE),
    case("all-devices-some-allocated", [claim("claim-0", req("req-0", CLASS_A, mode="All"))], CLASSES_A,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, [device("device-1"), device("device-2")])], UNSATISFIABLE,
         allocated=[(DRIVER_A, POOL_1, "device-1")]),
    case("all-devices-some-allocated-admin-access",
         [claim("claim-0", req("req-0", CLASS_A, admin=True, mode="All"))], CLASSES_A,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, [device("device-1"), device("device-2")])],
         [[("req-0", DRIVER_A, POOL_1, "device-1"), ("req-0", DRIVER_A, POOL_1, "device-2")]],
         features={"AdminAccess": True}, allocated=[(DRIVER_A, POOL_1, "device-1")]),
    case("all-devices-some-allocating-admin-access",
         [claim("claim-0", req("req-0", CLASS_A, 1, admin=True), req("req-1", CLASS_A, 1, admin=True, mode="All"))],
         CLASSES_A, [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, [device("device-1"), device("device-2")])],
         UNSATISFIABLE, features={"AdminAccess": True}),
    case("network-attached-device", [claim("claim-0", req("req-0", CLASS_A))], CLASSES_A,
         [one("slice-1", region_selector(REGION_1), POOL_1, DRIVER_A)], [[("req-0", DRIVER_A, POOL_1, "device-1")]]),
    case("unsuccessful-allocation-network-attached-device", [claim("claim-0", req("req-0", CLASS_A))], CLASSES_A,
         [one("slice-1", region_selector(REGION_1), POOL_1, DRIVER_A)], UNSATISFIABLE, at=node(NODE_2, REGION_2)),
    case("several-different-drivers",
         [claim("claim-0", req("req-0", CLASS_A)), claim("claim-0", req("req-0", CLASS_B))], CLASSES_AB,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, [device("device-1"), device("device-2")]),
          one("slice-1", NODE_1, POOL_1, DRIVER_B)],
         [[("req-0", DRIVER_A, POOL_1, "device-1")], [("req-0", DRIVER_B, POOL_1, "device-1")]]),
    case("already-allocated-devices", [claim("claim-0", req("req-0", CLASS_A))], CLASSES_A,
         [one("slice-1", NODE_1, POOL_1, DRIVER_A)], UNSATISFIABLE,
         allocated=[(DRIVER_A, POOL_1, "device-1"), (DRIVER_A, POOL_1, "device-2")]),
    case("admin-access-enabled", [claim("claim-0", req("req-0", CLASS_A, admin=True))], CLASSES_A,
         [one("slice-1", NODE_1, POOL_1, DRIVER_A)], [[("req-0", DRIVER_A, POOL_1, "device-1")]],
         features={"AdminAccess": True}, allocated=[(DRIVER_A, POOL_1, "device-1"), (DRIVER_A, POOL_1, "device-2")]),
    case("admin-access-disabled", [claim("claim-0", req("req-0", CLASS_A, admin=True))], CLASSES_A,
         [one("slice-1", NODE_1, POOL_1, DRIVER_A)], error("admin access is requested, but the feature is disabled"),
         features={"AdminAccess": False}),
    case("with-constraint",
         [claim("claim-0", req("req-0", CLASS_A, 1), req("req-1", CLASS_A, 1),
                constraints=[{"matchAttribute": a} for a in (INT_ATTR, VERSION_ATTR, STRING_ATTR, BOOL_ATTR)])],
         CLASSES_A,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, [
             device(f"device-{i}", attributes={"driverVersion": {"version": "1.0.0"}, "numa": {"int": 1},
                                               "stringAttribute": {"string": "stringAttributeValue"},
                                               "boolAttribute": {"bool": True}}) for i in (1, 2)])],
         [[("req-0", DRIVER_A, POOL_1, "device-1"), ("req-1", DRIVER_A, POOL_1, "device-2")]]),
    case("with-constraint-non-existent-attribute",
         [claim("claim-0", req("req-0", CLASS_A), constraints=[{"matchAttribute": MISSING_ATTR}])], CLASSES_A,
         [one("slice-1", NODE_1, POOL_1, DRIVER_A)], UNSATISFIABLE),
    *[case(f"with-constraint-not-matching-{kind}-attribute",
           [claim("claim-0", req("req-0", CLASS_A, 2), constraints=[{"matchAttribute": f"{DRIVER_A}/{attr}"}])],
           CLASSES_AB,
           [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, [device("device-1", attributes={attr: {kind_key: v1}}),
                                                         device("device-2", attributes={attr: {kind_key: v2}})])],
           UNSATISFIABLE)
      for kind, attr, kind_key, v1, v2 in [("int", "numa", "int", 1, 2),
                                           ("string", "stringAttribute", "string", "stringAttributeValue",
                                            "stringAttributeValue2"),
                                           ("bool", "boolAttribute", "bool", True, False),
                                           ("version", "driverVersion", "version", "1.0.0", "2.0.0")]],
    case("with-constraint-for-request",
         [claim("claim-0", req("req-0", CLASS_A, 1), req("req-1", CLASS_A, 1),
                constraints=[{"requests": ["req-0"], "matchAttribute": VERSION_ATTR}])], CLASSES_AB,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A,
                 [device("device-1", attributes={"driverVersion": {"version": "1.0.0"}}),
                  device("device-2", attributes={"driverVersion": {"version": "2.0.0"}})])],
         [[("req-0", DRIVER_A, POOL_1, "device-1"), ("req-1", DRIVER_A, POOL_1, "device-2")]]),
    case("invalid-CEL-one-device", [claim("claim-0", req("req-0", CLASS_A, selectors=["noSuchVar"]))], CLASSES_A,
         [one("slice-1", NODE_1, POOL_1, DRIVER_A)], error("undeclared reference")),
    case("invalid-CEL-one-device-class", [claim("claim-0", req("req-0", CLASS_A))],
         [klass(CLASS_A, DRIVER_A, "noSuchVar")], [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
         error("undeclared reference")),
    case("invalid-CEL-all-devices",
         [claim("claim-0", req("req-0", CLASS_A, selectors=["noSuchVar"], mode="All"))], CLASSES_A,
         [one("slice-1", NODE_1, POOL_1, DRIVER_A)], error("undeclared reference")),
    case("too-many-devices-single-request", [claim("claim-0", req("req-0", CLASS_A, 500))], CLASSES_A, [],
         error("exceeds the claim limit")),
    case("max-number-devices", [claim("claim-0", req("req-0", CLASS_A, 32))], CLASSES_A,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, [device(f"device-{i}") for i in range(32)])],
         [[("req-0", DRIVER_A, POOL_1, f"device-{i}") for i in range(32)]]),
    case("unknown-constraint", [claim("claim-0", req("req-0", CLASS_A), constraints=[{}])], CLASSES_A,
         [one("slice-1", NODE_1, POOL_1, DRIVER_A)], error("empty constraint (unsupported constraint type?)")),
    case("unknown-allocation-mode", [claim("claim-0", req("req-0", CLASS_A, mode="future-mode"))], CLASSES_A,
         [one("slice-1", NODE_1, POOL_1, DRIVER_A)], error("unsupported count mode future-mode")),
    case("prioritized-list-first-unavailable",
         [claim("claim-0", first_available("req-0", sub("subReq-0", CLASS_B, 1), sub("subReq-1", CLASS_A, 1)))],
         CLASSES_AB, [one("slice-1", NODE_1, POOL_1, DRIVER_A)], [[("req-0/subReq-1", DRIVER_A, POOL_1, "device-1")]],
         features={"PrioritizedList": True}),
    case("prioritized-list-non-available",
         [claim("claim-0", first_available("req-0", sub("subReq-0", CLASS_B, 2), sub("subReq-1", CLASS_A, 2)))],
         CLASSES_AB, [one("slice-1", NODE_1, POOL_1, DRIVER_A), one("slice-2", NODE_1, POOL_2, DRIVER_B)],
         UNSATISFIABLE, features={"PrioritizedList": True}),
    case("prioritized-list-subrequests-with-constraints-ref-sub-request",
         [claim("claim-0", req("req-0", CLASS_A, 1, selectors=[memory_at_least("8Gi")]),
                first_available("req-1", sub("subReq-0", CLASS_A, 1, selectors=[memory_at_least("2Gi")]),
                                sub("subReq-1", CLASS_A, 1, selectors=[memory_at_least("1Gi")])),
                constraints=[{"requests": ["req-0", "req-1/subReq-0"], "matchAttribute": VERSION_ATTR}])],
         CLASSES_A,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A,
                 [device("device-1", {"memory": "8Gi"}, {"driverVersion": {"version": "1.0.0"}})]),
          slice_("slice-2", NODE_1, POOL_2, DRIVER_A,
                 [device("device-2", {"memory": "2Gi"}, {"driverVersion": {"version": "2.0.0"}})])],
         [[("req-0", DRIVER_A, POOL_1, "device-1"), ("req-1/subReq-1", DRIVER_A, POOL_2, "device-2")]],
         features={"PrioritizedList": True}),
    case("partitionable-devices-single-device", [claim("claim-0", req("req-0", CLASS_A, 1))], CLASSES_A,
         [slice_("slice-1", NODE_1, pool(POOL_1, 2), DRIVER_A,
                 [device("device-1", consumesCounters=[consumes("counter-set-1", memory="4Gi")])]),
          slice_("slice-2", NODE_1, pool(POOL_1, 2), DRIVER_A,
                 shared_counters=[counter_set("counter-set-1", memory="8Gi")])],
         [[("req-0", DRIVER_A, POOL_1, "device-1")]], features={"PartitionableDevices": True}),
    case("partitionable-devices-multiple-devices",
         [claim("claim-0", req("req-0", CLASS_A, 1), req("req-1", CLASS_A, 1))], CLASSES_A,
         [slice_("slice-1", NODE_1, pool(POOL_1, 2), DRIVER_A,
                 [device(name, {"memory": amount}, consumesCounters=[consumes("counter-set-1", memory=amount)])
                  for name, amount in (("device-1", "4Gi"), ("device-2", "6Gi"), ("device-3", "4Gi"))]),
          slice_("slice-2", NODE_1, pool(POOL_1, 2), DRIVER_A,
                 shared_counters=[counter_set("counter-set-1", memory="8Gi")])],
         [[("req-0", DRIVER_A, POOL_1, "device-1"), ("req-1", DRIVER_A, POOL_1, "device-3")]],
         features={"PartitionableDevices": True}),
    case("partitionable-devices-no-capacity-available", [claim("claim-0", req("req-0", CLASS_A, 1))], CLASSES_A,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A,
                 [device(name, {"memory": amount}, consumesCounters=[consumes("counter-set-1", memory=amount)])
                  for name, amount in (("device-1", "4Gi"), ("device-2", "16Gi"))]),
          slice_("slice-2", NODE_1, POOL_1, DRIVER_A, shared_counters=[counter_set("counter-set-1", memory="18Gi")])],
         UNSATISFIABLE, features={"PartitionableDevices": True}, allocated=[(DRIVER_A, POOL_1, "device-2")]),
    case("partitionable-devices-device-counter-consumption-references-unknown-counter-set",
         [claim("claim-0", req("req-0", CLASS_A, 1))], CLASSES_A,
         [slice_("slice-1", NODE_1, pool(POOL_1, 2), DRIVER_A,
                 [device("device-1", consumesCounters=[{"counterSet": "counter-set-2", "counters": {}}])]),
          slice_("slice-2", NODE_1, pool(POOL_1, 2), DRIVER_A,
                 shared_counters=[{"name": "counter-set-1", "counters": {}}])],
         error("invalid resource pools were encountered"), features={"PartitionableDevices": True}),
    case("partitionable-devices-per-device-node-selection-node-selector",
         [claim("claim-0", req("req-0", CLASS_A, 1))], CLASSES_A,
         [slice_("slice-1", "per-device", pool(POOL_1, 2), DRIVER_A,
                 [device("device-1", {"memory": "4Gi"}, consumesCounters=[consumes("counter-set-1", memory="4Gi")],
                         nodeSelector=region_selector(REGION_1))]),
          slice_("slice-2", "per-device", pool(POOL_1, 2), DRIVER_A,
                 shared_counters=[counter_set("counter-set-1", memory="18Gi")])],
         [[("req-0", DRIVER_A, POOL_1, "device-1")]], features={"PartitionableDevices": True, "PrioritizedList": True}),
    case("tainted-two-devices", [claim("claim-0", req("req-0", CLASS_A))], CLASSES_A,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, [device("device-1", taints=[TAINT_NO_SCHEDULE]),
                                                       device("device-2", taints=[TAINT_NO_EXECUTE])])],
         UNSATISFIABLE, features={"DeviceTaints": True}),
    case("tainted-two-devices-tolerated", [claim("claim-0", req("req-0", CLASS_A, tolerations=[TOLERATE_NO_EXECUTE]))],
         CLASSES_A,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, [device("device-1", taints=[TAINT_NO_SCHEDULE]),
                                                       device("device-2", taints=[TAINT_NO_EXECUTE])])],
         [[("req-0", DRIVER_A, POOL_1, "device-2")]], features={"DeviceTaints": True}),
    case("tainted-no-effect", [claim("claim-0", req("req-0", CLASS_A))], CLASSES_A,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, [device("device-1", taints=[TAINT_NONE])])],
         [[("req-0", DRIVER_A, POOL_1, "device-1")]], features={"DeviceTaints": True}),
    case("tainted-all-devices-single", [claim("claim-0", req("req-0", CLASS_A, mode="All"))], CLASSES_A,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, [device("device-1", taints=[TAINT_NO_SCHEDULE])])],
         UNSATISFIABLE, features={"DeviceTaints": True}),
    case("device-binding-conditions", [claim("claim-0", req("req-0", CLASS_A, 1))], CLASSES_A,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A,
                 [device("device-1", bindingConditions=["IsPrepare"], bindingFailureConditions=["BindingFailed"])])],
         [[("req-0", DRIVER_A, POOL_1, "device-1")]], features={"DeviceBindingAndStatus": True}),
    case("consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request",
         [claim("claim-0", req("req-0", CLASS_A, 1, capacity={"capacity-0": "1"})),
          claim("claim-1", req("req-0", CLASS_A, 1, capacity={"capacity-0": "1"}))], ALL_ON_MULTIPLE,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A,
                 [device("device-1", {"capacity-0": {"value": "4", "requestPolicy": RANGE_2_2_4}},
                         allowMultipleAllocations=True)])],
         [[("req-0", DRIVER_A, POOL_1, "device-1")], [("req-0", DRIVER_A, POOL_1, "device-1")]],
         features={"ConsumableCapacity": True}),
    case("consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request",
         [claim("claim-0", req("req-0", CLASS_A, 1, capacity={"capacity-0": "1"})),
          claim("claim-1", req("req-0", CLASS_A, 1, capacity={"capacity-0": "2"}))], ALL_ON_MULTIPLE,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A,
                 [device("device-1", {"capacity-0": {"value": "2", "requestPolicy": RANGE_2_2_4}},
                         allowMultipleAllocations=True)])],
         UNSATISFIABLE, features={"ConsumableCapacity": True}),
    case("with-distinct-constraints",
         [claim("claim-0", *[req(f"req-{i}", CLASS_A, 1) for i in range(4)], constraints=[
             {"distinctAttribute": BOOL_ATTR, "requests": ["req-0", "req-1"]},
             {"distinctAttribute": VERSION_ATTR, "requests": ["req-0", "req-1", "req-2"]},
             {"distinctAttribute": INT_ATTR, "requests": ["req-0", "req-1", "req-2", "req-3"]}])], CLASSES_A,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, [
             device(f"device-{i + 1}", attributes={"driverVersion": {"version": v}, "numa": {"int": i},
                                                   "boolAttribute": {"bool": b}}, allowMultipleAllocations=True)
             for i, (v, b) in enumerate([("1.0.0", True), ("1.0.1", False), ("1.0.2", True), ("1.0.0", True)])])],
         [[("req-0", DRIVER_A, POOL_1, "device-1"), ("req-1", DRIVER_A, POOL_1, "device-2"),
           ("req-2", DRIVER_A, POOL_1, "device-3"), ("req-3", DRIVER_A, POOL_1, "device-4")]],
         features={"ConsumableCapacity": True}),
    case("distinct-constraint-single-request-count-3-not-distinct",
         [claim("claim-0", req("req-0", CLASS_A, 3), constraints=[{"distinctAttribute": STRING_ATTR}])], CLASSES_A,
         [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, [
             device(f"device-{i}", attributes={"stringAttribute": {"string": v}})
             for i, v in ((1, "value1"), (2, "value2"), (3, "value1"))])],
         UNSATISFIABLE, features={"ConsumableCapacity": True}),
    case("no-allocation-from-incomplete-pools", [claim("claim-0", req("req-0", CLASS_A, 1))], CLASSES_A,
         [slice_("slice-1", NODE_1, pool(POOL_1, 2), DRIVER_A, [device("device-1")])], UNSATISFIABLE),
    case("invalid-pool-is-error-if-no-other-device-can-be-allocated",
         [claim("claim-0", req("req-0", CLASS_A, 1))], CLASSES_A,
         [slice_("slice-1", NODE_1, pool(POOL_1, 2), DRIVER_A, [device("device-1")]),
          slice_("slice-2", NODE_1, pool(POOL_1, 2), DRIVER_A, [device("device-1")]),
          slice_("slice-3", NODE_1, pool(POOL_2, 1), DRIVER_A, [device("device-2")])],
         error("invalid resource pools were encountered"), allocated=[(DRIVER_A, POOL_2, "device-2")]),
    # Issue 47: pools as the scheduler gathers them (structured/internal/stable/pools_stable.go).
    case("pool-split-over-two-slices", [claim("claim-0", req("req-0", CLASS_A, 2))], CLASSES_A,
         [slice_("slice-1", NODE_1, pool(POOL_1, 2), DRIVER_A, [device("device-1")]),
          slice_("slice-2", NODE_1, pool(POOL_1, 2), DRIVER_A, [device("device-2")])],
         [[("req-0", DRIVER_A, POOL_1, "device-1"), ("req-0", DRIVER_A, POOL_1, "device-2")]]),
    case("newer-generation-on-another-node-obsoletes-the-pool", [claim("claim-0", req("req-0", CLASS_A))],
         CLASSES_A, [slice_("slice-1", NODE_1, pool(POOL_1, 2, 1), DRIVER_A, [device("device-1")]),
                     slice_("slice-2", NODE_2, pool(POOL_1, 2, 2), DRIVER_A, [device("device-2")])],
         UNSATISFIABLE),
    case("newest-generation-incomplete-hides-the-older-one", [claim("claim-0", req("req-0", CLASS_A))], CLASSES_A,
         [slice_("slice-old", NODE_1, pool(POOL_1, 1, 1), DRIVER_A, [device("device-1")]),
          slice_("slice-new", NODE_1, pool(POOL_1, 2, 2), DRIVER_A, [device("device-2")])],
         UNSATISFIABLE),
    case("incomplete-pool-beside-a-complete-one", [claim("claim-0", req("req-0", CLASS_A))], CLASSES_A,
         [slice_("slice-1", NODE_1, pool(POOL_1, 2), DRIVER_A, [device("device-1")]),
          slice_("slice-2", NODE_1, pool(POOL_2, 1), DRIVER_A, [device("device-2")])],
         [[("req-0", DRIVER_A, POOL_2, "device-2")]]),
    case("all-devices-with-the-pool-complete-across-nodes", [claim("claim-0", req("req-0", CLASS_A, mode="All"))],
         CLASSES_A, [slice_("slice-1", NODE_1, pool(POOL_1, 2), DRIVER_A, [device("device-1")]),
                     slice_("slice-2", NODE_2, pool(POOL_1, 2), DRIVER_A, [device("device-2")])],
         [[("req-0", DRIVER_A, POOL_1, "device-1")]]),
]
