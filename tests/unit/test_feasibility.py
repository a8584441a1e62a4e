from app import dra
from app.dra import Inventory

CLASS = {"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": "device.driver == 'd.example.com'"}}]}}


def device(name, model="A", memory="80Gi", **attrs):
    a = {"model": {"string": model}}
    a.update({k: ({"int": v} if isinstance(v, int) else {"string": v}) for k, v in attrs.items()})
    return {"name": name, "attributes": a, "capacity": {"memory": {"value": memory}}}


def slice_(node, devices, pool=None, generation=1, count=1, name=None):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name or f"{node}-s"},
            "spec": {"driver": "d.example.com", "nodeName": node,
                     "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": count},
                     "devices": devices}}


def index(*slices, allocated=()):
    return dra.build_index(Inventory(slices=list(slices), classes={"gpu": CLASS}), set(allocated))


def claim(*requests, constraints=()):
    reqs = []
    for r in requests:
        reqs.append(r if "firstAvailable" in r else {"name": r.pop("name"), "exactly": {"deviceClassName": "gpu", **r}})
    return dra.parse_claim_spec({"devices": {"requests": reqs, "constraints": list(constraints)}})


def test_count_must_fit_on_one_node():
    ix = index(slice_("n1", [device("a"), device("b")]), slice_("n2", [device("c")]))
    assert dra.check(claim({"name": "r", "count": 2}), ix, count_nodes=True).nodes == 1
    verdict = dra.check(claim({"name": "r", "count": 3}), ix)
    assert verdict.status == "never"
    assert "r: 2 matching (needs 3)" in verdict.message


def test_requests_get_distinct_devices():
    ix = index(slice_("n1", [device("a"), device("b")]))
    assert dra.check(claim({"name": "x"}, {"name": "y"}), ix).status == "satisfiable"
    assert dra.check(claim({"name": "x"}, {"name": "y"}, {"name": "z"}), ix).status == "never"


def test_selector_failure_names_request_and_closest_devices():
    ix = index(slice_("n1", [device("a", model="A", memory="40Gi"), device("b", model="B", memory="80Gi")]))
    sel = [{"cel": {"expression": "device.attributes['d.example.com'].model == 'A'"}},
           {"cel": {"expression": "device.capacity['d.example.com'].memory.compareTo(quantity('64Gi')) >= 0"}}]
    verdict = dra.check(claim({"name": "big-a", "selectors": sel}), ix)
    assert verdict.status == "never" and verdict.failed_request == "big-a"
    assert "spec.devices.requests[0].exactly.selectors[0]" in verdict.message or \
           "selectors[1]" in verdict.message
    assert len(verdict.closest) == 2 and all("fails" in c for c in verdict.closest)


def test_allocated_devices_make_it_unsatisfiable_now_not_never():
    ix = index(slice_("n1", [device("a")]), allocated={("d.example.com", "n1", "a")})
    assert dra.check(claim({"name": "r"}), ix).status == "unsatisfiable-now"
    assert dra.check(claim({"name": "r", "adminAccess": True}), ix).status == "satisfiable"


def test_allocation_mode_all_needs_every_matching_device_free():
    ix = index(slice_("n1", [device("a"), device("b")]), allocated={("d.example.com", "n1", "b")})
    assert dra.check(claim({"name": "r", "allocationMode": "All"}), ix).status == "unsatisfiable-now"
    assert dra.check(claim({"name": "r", "allocationMode": "All"}), index(slice_("n1", [device("a")]))).nodes == 1


def test_first_available_falls_back_in_order():
    ix = index(slice_("n1", [device("a", model="OLD")]))
    first = {"name": "g", "firstAvailable": [
        {"name": "new", "deviceClassName": "gpu",
         "selectors": [{"cel": {"expression": "device.attributes['d.example.com'].model == 'NEW'"}}]},
        {"name": "any", "deviceClassName": "gpu"}]}
    assert dra.check(claim(first), ix).status == "satisfiable"


def test_match_attribute_needs_one_value_for_all_listed_requests():
    ix = index(slice_("n1", [device("a", parent="p1"), device("b", parent="p2")]))
    match = [{"requests": [], "matchAttribute": "d.example.com/parent"}]
    assert dra.check(claim({"name": "x"}, {"name": "y"}, constraints=match), ix).status == "never"
    ix2 = index(slice_("n1", [device("a", parent="p1"), device("b", parent="p1")]))
    assert dra.check(claim({"name": "x"}, {"name": "y"}, constraints=match), ix2).status == "satisfiable"


def test_distinct_attribute_needs_different_values():
    same = index(slice_("n1", [device("a", numa=0), device("b", numa=0)]))
    differ = index(slice_("n1", [device("a", numa=0), device("b", numa=1)]))
    distinct = [{"distinctAttribute": "d.example.com/numa"}]
    assert dra.check(claim({"name": "x"}, {"name": "y"}, constraints=distinct), same).status == "never"
    assert dra.check(claim({"name": "x"}, {"name": "y"}, constraints=distinct), differ).status == "satisfiable"


def test_incomplete_pool_is_not_usable_now_and_stale_generations_are_ignored():
    incomplete = index(slice_("n1", [device("a")], count=2))
    verdict = dra.check(claim({"name": "r"}), incomplete)
    assert verdict.status == "unsatisfiable-now"
    # Issue 47: the verdict names the pool and what it lacks.
    [(driver, pool)] = incomplete.incomplete_pools
    assert f"incomplete pools: {driver}/{pool} (1 of its 2 slice(s) at generation 1 published)" in verdict.message
    stale = index(slice_("n1", [device("old"), device("old2")], generation=1, name="s1"),
                  slice_("n1", [device("new")], generation=2, name="s2"))
    assert [stale.devices[p].key[2] for pool in stale.views["n1"] for p in pool.devices] == ["new"]
    two = claim({"name": "r", "count": 2})
    assert dra.check(two, stale).status == "never"  # the old generation's two devices are gone


def test_missing_device_class_and_bad_cel():
    ix = index(slice_("n1", [device("a")]))
    verdict = dra.check(dra.parse_claim_spec({"devices": {"requests": [
        {"name": "r", "exactly": {"deviceClassName": "nope"}}]}}), ix)
    # Issue 24: the scheduler's PreFilter finds the class missing before the allocator runs: the
    # pod stays Unschedulable (retried when the class appears), it never meets an error.
    assert verdict.status == "never" and "DeviceClass 'nope' does not exist" in verdict.message
    assert "Unschedulable until it is created" in verdict.message
    bad = dra.check(claim({"name": "r", "selectors": [{"cel": {"expression": "device.attributes["}}]}), ix)
    assert bad.status == "invalid" and "spec.devices.requests[0].exactly.selectors[0].cel.expression" in bad.message


def test_identical_devices_share_one_shape():
    ix = index(*[slice_(f"n{i}", [device(f"g{j}", uuid=f"u{i}-{j}") for j in range(4)]) for i in range(50)])
    assert len(ix.devices) == 200 and len(ix.shapes) == 1


def test_shared_devices_are_reachable_from_every_node():
    network = slice_("", [device("net")], pool="fabric", name="fabric")
    network["spec"].pop("nodeName")
    network["spec"]["allNodes"] = True
    ix = index(slice_("n1", [device("a")]), network)
    assert dra.check(claim({"name": "x"}, {"name": "y"}), ix, count_nodes=True).nodes == 1



def typed(name, **attributes):
    """A device whose attributes are given as ResourceSlice values ({"version": ...}, {"bool": ...})."""
    return {"name": name, "attributes": attributes}


def test_match_attribute_on_versions_compares_their_text():
    ix = index(slice_("n1", [typed("a", driverVersion={"version": "1.0.0"}),
                             typed("b", driverVersion={"version": "1.0.0"}),
                             typed("c", driverVersion={"version": "2.0.0"})]))
    same = [{"matchAttribute": "d.example.com/driverVersion"}]
    assert dra.check(claim({"name": "r", "count": 2}, constraints=same), ix).status == "satisfiable"
    assert dra.check(claim({"name": "r", "count": 3}, constraints=same), ix).status == "never"


def test_bool_true_never_matches_int_one():
    ix = index(slice_("n1", [typed("a", flag={"bool": True}), typed("b", flag={"int": 1})]))
    same = [{"matchAttribute": "d.example.com/flag"}]
    assert dra.check(claim({"name": "r", "count": 2}, constraints=same), ix).status == "never"


def test_an_unusable_value_leaves_out_that_device_only():
    ix = index(slice_("n1", [typed("good", model={"string": "A"}), typed("bad", driverVersion={"version": "x.y"}),
                             typed("odd", weird={"float": 1.5}), typed("listed", tags={"strings": ["x", "y"]})]))
    assert sorted(r[2] for r in ix.rejected) == ["bad", "odd"]
    assert len(ix.devices) == 2  # list-typed attributes are usable values
    assert dra.check(claim({"name": "r", "count": 2}), ix).status == "satisfiable"
    assert dra.check(claim({"name": "r", "count": 3}), ix).status == "never"


def test_taints_block_devices_unless_tolerated():
    xid = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute"}
    ix = index(slice_("n1", [{**typed("a"), "taints": [xid]},
                             {**typed("b"), "taints": [{"key": "maintenance", "effect": "None"}]}]))
    assert dra.check(claim({"name": "r", "count": 2}), ix).status == "never"
    assert dra.check(claim({"name": "r", "count": 1}), ix).status == "satisfiable"  # effect None never blocks
    tolerant = {"name": "r", "count": 2, "tolerations": [{"key": "gpu.nvidia.com/xid", "operator": "Exists"}]}
    assert dra.check(claim(tolerant), ix).status == "satisfiable"
    other_effect = {"name": "r", "count": 2, "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}]}
    assert dra.check(claim(other_effect), ix).status == "never"
    assert dra.check(claim({"name": "r", "allocationMode": "All"}), ix).status == "never"  # All needs every device


def test_bad_tolerations_name_the_field():
    import pytest

    with pytest.raises(dra.ClaimError, match=r"requests\[0\]\.exactly\.tolerations\[0\]"):
        claim({"name": "r", "tolerations": [{"key": 3}]})


def test_first_available_beyond_64_combinations_is_searched_not_capped():
    # Three requests of five alternatives: 125 combinations; only the last one of each fits.
    models = ["B", "C", "D", "E", "A"]

    def request(i):
        return {"name": f"r{i}", "firstAvailable": [
            {"name": f"s{j}", "deviceClassName": "gpu", "selectors": [{"cel": {
                "expression": f"device.attributes['d.example.com'].model == '{m}'"}}]} for j, m in enumerate(models)]}

    ix = index(slice_("n1", [device("a"), device("b"), device("c")]))
    assert dra.check(claim(request(0), request(1), request(2)), ix).status == "satisfiable"
    assert dra.check(claim(request(0), request(1), request(2), request(3)), ix).status == "never"


def test_duplicate_device_names_make_the_pool_invalid():
    """Kubernetes 1.37: the node is unschedulable (ErrFailedAllocationOnNode), the cycle goes on."""
    ix = index(slice_("n1", [device("a"), device("a")]))
    verdict = dra.check(claim({"name": "r"}), ix)
    assert verdict.status == "never" and "node n1 is unschedulable" in verdict.message
    assert "duplicate device name a" in verdict.message


def test_binding_conditions_are_allocatable_and_noted():
    waiting = device("a") | {"bindingConditions": ["example.com/attached"], "bindingFailureConditions": ["x/failed"]}
    verdict = dra.check(claim({"name": "r"}), index(slice_("n1", [waiting])))
    assert verdict.status == "satisfiable"
    assert any("binding conditions" in note for note in verdict.notes)


def network_slice(region):
    s = slice_("unused", [device("far")], pool="far")
    del s["spec"]["nodeName"]
    s["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "region", "operator": "In", "values": [region]}]}]}
    return s


def test_node_selector_slices_reach_only_matching_nodes_when_nodes_are_known():
    slices = [slice_("n1", [device("local", model="B")]), network_slice("east")]
    wants_far = claim({"name": "r", "selectors": [{"cel": {"expression": "device.attributes['d.example.com'].model "
                                                                          "== 'A'"}}]})
    west = dra.build_index(Inventory(slices=slices, classes={"gpu": CLASS}, nodes={"n1": {"region": "west"}}))
    assert dra.check(wants_far, west).status == "never"
    east = dra.build_index(Inventory(slices=slices, classes={"gpu": CLASS},
                                     nodes={"n1": {"region": "east"}, "n2": {"region": "east"}}))
    verdict = dra.check(wants_far, east, count_nodes=True)
    assert verdict.status == "satisfiable" and verdict.nodes == 2  # n2 has no devices of its own
    unknown = dra.build_index(Inventory(slices=slices, classes={"gpu": CLASS}))
    assumed = dra.check(wants_far, unknown)
    assert assumed.status == "satisfiable" and any("no Node objects" in n for n in assumed.notes)


def test_node_objects_in_an_inventory_file_are_read(tmp_path):
    from app.cli import load_inventory

    path = tmp_path / "inventory.yaml"
    path.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  labels:\n    region: east\n---\n"
                    "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: gpu.nvidia.com\n")
    assert load_inventory(str(path)).nodes == {"n1": {"region": "east"}}


def test_closest_devices_name_each_kind_once_with_its_count():
    """MIG placements differ in their memory slices, so each is its own shape; a user asking
    for a missing profile is told each profile there is, once, with how many devices it has."""
    from app.cli import load_inventory
    from app.common import read_objects
    from tests.conftest import ROOT

    [(_line, claim)] = read_objects(str(ROOT / "examples" / "claims" / "four-mig-1g5gb-same-gpu.yaml"))
    verdict = dra.check(dra.parse_claim_object(claim), dra.build_index(load_inventory(None)))
    assert verdict.status == "never"
    kinds = [c.split(" (")[0] for c in verdict.closest]
    assert len(kinds) == len(set(kinds)) == 3
    assert "profile 1g.10gb, memory 9728Mi (8 devices)" in verdict.closest[0]


def test_constraint_patterns_are_computed_once_per_node_for_a_burst_of_claims(monkeypatch):
    """Issue 22: 2,000 equal nodes and a matchAttribute claim: each claim recomputed every node's
    constraint pattern (600 ms a claim through /validate). Now once per node per index; the
    verdicts stay the same."""

    nodes = [slice_(f"n{i:03d}", [device(f"g{j}", root=f"r{j // 2}") for j in range(4)]) for i in range(50)]
    ix = index(*nodes)
    calls = []
    from app.dra import units
    real = units.constraint_pattern
    monkeypatch.setattr(units, "constraint_pattern", lambda *a: calls.append(1) or real(*a))
    paired = [{"requests": ["r"], "matchAttribute": "d.example.com/root"}]
    first = dra.check(claim({"name": "r", "count": 2}, constraints=paired), ix, count_nodes=True)
    assert first.status == "satisfiable" and first.nodes == 50 and len(calls) == 50
    other = dra.check(claim({"name": "r", "count": 2, "selectors": [{"cel": {"expression": "device.attributes"
                                                                             "['d.example.com'].model == 'A'"}}]},
                            constraints=paired), ix, count_nodes=True)
    assert other.nodes == 50 and len(calls) == 50  # a new claim, the same constraint: nothing recomputed
    assert dra.check(claim({"name": "r", "count": 3}, constraints=paired), ix).status == "never"


def test_issue_24_an_error_on_one_node_fails_the_pod_whatever_another_node_offers():
    """Below 100 nodes the scheduler filters every node: an error on any one (here a CEL runtime
    error on the devices of n1) ends the scheduling cycle even though n2 could hold the claim.
    From 100 nodes on it may stop before it reaches n1: satisfiable, with a note naming n1."""
    def nodes(count):
        slices = [slice_("n1", [device("a", kind="odd")])]
        slices += [slice_(f"n{i}", [device("a", kind=1)]) for i in range(2, count + 1)]
        return index(*slices)
    spec = claim({"name": "r", "selectors": [{"cel": {"expression": "device.attributes['d.example.com'].kind > 0"}}]})
    few = dra.check(spec, nodes(3))
    assert few.status == "invalid" and "error on node n1" in few.message and "fewer than 100" in few.message
    many = dra.check(spec, nodes(100))
    assert many.status == "satisfiable"
    assert any("if the scheduler filters node n1" in n for n in many.notes)


def test_issue_24_nodes_equal_but_for_which_device_is_held_are_judged_apart():
    """Found by the NVIDIA-shaped differential run (1 in 20,000): two equal nodes, each with one
    GPU held, on different NUMA nodes; a claim for two GPUs on one NUMA node fits only the node
    whose held GPU leaves a pair (numaNode is an identity attribute: both nodes share a group)."""
    def gpus(node):
        return slice_(node, [device("a", numaNode=0), device("b", numaNode=0), device("c", numaNode=1)])
    ix = index(gpus("n1"), gpus("n2"), allocated=[("d.example.com", "n1", "b"), ("d.example.com", "n2", "c")])
    spec = claim({"name": "r", "count": 2}, constraints=[{"requests": ["r"], "matchAttribute": "d.example.com/numaNode"}])
    verdict = dra.check(spec, ix, count_nodes=True)
    assert verdict.status == "satisfiable" and verdict.nodes == 1 and verdict.example_node == "n2"
