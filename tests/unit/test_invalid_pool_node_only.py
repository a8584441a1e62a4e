"""Issue 33: an invalid pool fails only its node (upstream wraps the error in
ErrFailedAllocationOnNode: the scheduler marks that node unschedulable and tries the others);
it is surfaced only when no node can take the pod."""

from app import dra
from app.dra.claims import parse_claim_spec
from app.dra.feasibility import check

CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
         "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}


def pool_slice(node, devices):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-slice"},
            "spec": {"driver": "gpu.example.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": d} for d in devices]}}


def verdict(slices, count=1):
    index = dra.build_index(dra.inventory_from_objects([(0, o) for o in [CLASS, *slices]], "test"))
    spec = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com",
                                                                  "count": count}}]}}
    return check(parse_claim_spec(spec, "spec"), index)


def test_an_invalid_pool_on_one_node_leaves_the_others_to_take_the_pod():
    broken = pool_slice("node-1", ["gpu-0", "gpu-0"])  # a device name twice: the pool is invalid
    found = verdict([broken, pool_slice("node-2", ["gpu-0"])])
    assert found.status == "satisfiable" and found.example_node == "node-2", found.message
    assert any("node node-1 is unschedulable for it" in n for n in found.notes)


def test_with_no_node_left_the_invalid_pool_is_named_but_the_pod_is_only_unschedulable():
    found = verdict([pool_slice("node-1", ["gpu-0", "gpu-0"]), pool_slice("node-2", ["gpu-0"])], count=2)
    assert found.status in ("never", "unsatisfiable-now"), found.message
    assert found.message.startswith("node node-1 is unschedulable (invalid resource pools were encountered")
