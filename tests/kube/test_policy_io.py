"""The admin rules' IO edges: the claims a pod names are read (as they are now), and a refused
policy reload becomes an Event on the policy's ConfigMap."""

import time

from app import kube


def claim(name):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}


def test_claims_are_read_as_they_are_now_and_ours_only_while_the_api_has_none(fake_kube):
    """Issue 56: a read was kept 30 s, so a claim deleted and created again with 8 devices was
    judged as it had been; a template this replica generated was believed for ever. Now every
    read asks the API; what this replica generated answers only while the API has no such name."""
    fake_kube.objects[("team-a", "resourceclaims", "c")] = claim("c")
    reader = kube.ClaimReader(kube.api_client_for_host(fake_kube.url))
    assert reader("team-a", "ResourceClaim", "c")["spec"]["devices"]["requests"][0]["exactly"].get("count") is None
    replaced = claim("c")
    replaced["spec"]["devices"]["requests"][0]["exactly"]["count"] = 8
    fake_kube.objects[("team-a", "resourceclaims", "c")] = replaced  # deleted, created again
    assert reader("team-a", "ResourceClaim", "c")["spec"]["devices"]["requests"][0]["exactly"]["count"] == 8
    assert reader("team-a", "ResourceClaim", "gone") is None
    fake_kube.objects[("team-a", "resourceclaims", "gone")] = claim("gone")  # created right after
    assert reader("team-a", "ResourceClaim", "gone")["metadata"]["name"] == "gone"  # "missing" never kept
    reads = [r for r in fake_kube.requests if r.method == "GET" and "resourceclaims" in r.path]
    assert len(reads) == 4
    generated = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                 "metadata": {"name": "t", "namespace": "team-a"}, "spec": {"spec": {"devices": {"requests": []}}}}
    reader.remember("team-a", generated)
    assert reader("team-a", "ResourceClaimTemplate", "t") is generated  # before the API has it
    tenants = {**generated, "spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "count": 8}}]}}}}
    fake_kube.objects[("team-a", "resourceclaimtemplates", "t")] = tenants  # the name taken over
    assert reader("team-a", "ResourceClaimTemplate", "t") == tenants


def test_the_pod_a_schedulers_claim_serves_is_read_as_it_is_now(fake_kube):
    fake_kube.objects[("team-a", "pods", "p")] = {"apiVersion": "v1", "kind": "Pod",
                                                 "metadata": {"name": "p", "namespace": "team-a"}, "spec": {}}
    reader = kube.ClaimReader(kube.api_client_for_host(fake_kube.url))
    assert reader("team-a", "Pod", "p")["metadata"]["name"] == "p"
    assert reader("team-a", "Pod", "gone") is None
    assert [r.path for r in fake_kube.requests if r.method == "GET"] == [
        "/api/v1/namespaces/team-a/pods/p", "/api/v1/namespaces/team-a/pods/gone"]


def test_a_refused_reload_is_an_event_on_the_configmap(fake_kube):
    fake_kube.objects[("dra-bridge", "configmaps", "dra-bridge-policy")] = {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dra-bridge-policy", "namespace": "dra-bridge",
                                                             "uid": "cm-uid-1"}, "data": {}}
    sink = kube.EventSink(kube.api_client_for_host(fake_kube.url), "dra-bridge", "dra-bridge-policy",
                          instance="dra-bridge-0")
    sink.post("Warning", "PolicyRejected", "policy not taken: defaults.mode")
    deadline = time.monotonic() + 10
    while not sink.posted and time.monotonic() < deadline:
        time.sleep(0.05)
    [write] = [w for w in fake_kube.writes() if w.path == "/api/v1/namespaces/dra-bridge/events"]
    # The uid too: `kubectl describe configmap` lists only the Events that name it.
    assert write.body["involvedObject"] == {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "dra-bridge",
                                            "name": "dra-bridge-policy", "uid": "cm-uid-1"}
    assert (write.body["type"], write.body["reason"], write.body["reportingInstance"]) == \
        ("Warning", "PolicyRejected", "dra-bridge-0")
    assert kube.EventSink(None, "dra-bridge", "x").post("Warning", "PolicyRejected", "m") is None  # no API: nothing


def pod_group(name, *claims):
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"resourceClaims": [{"name": c, "resourceClaimTemplateName": "t"} for c in claims]}}


def test_a_pod_group_is_read_from_the_version_the_server_serves(fake_kube):
    from tests.kube.fakeapi import Fault
    fake_kube.objects[("team-a", "podgroups", "train")] = pod_group("train", "dra-bridge-gpus")
    # This server has no v1beta1 (1.36, or 1.37 with only the alpha on): a 404 without details.
    fake_kube.faults.append(Fault(status=404, path_contains="scheduling.k8s.io/v1beta1/", times=99))
    reader = kube.ClaimReader(kube.api_client_for_host(fake_kube.url))
    assert reader("team-a", "PodGroup", "absent") is None  # the object's own 404: served, not there
    assert reader("team-a", "PodGroup", "train")["spec"]["resourceClaims"][0]["name"] == "dra-bridge-gpus"
    groups = [r.path.rsplit("/apis/", 1)[1] for r in fake_kube.requests if "podgroups" in r.path]
    assert groups == ["scheduling.k8s.io/v1beta1/namespaces/team-a/podgroups/absent",
                      "scheduling.k8s.io/v1alpha3/namespaces/team-a/podgroups/absent",
                      "scheduling.k8s.io/v1alpha3/namespaces/team-a/podgroups/train"]
