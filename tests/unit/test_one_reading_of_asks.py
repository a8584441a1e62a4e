"""Issue 57 item 3: one reading of what a container asks (migration.asked: the limit where one is
written, else the request) for the planner, the quota and rollout counts, and the admin rules.
A pod whose request and limit differ is refused by the API server unless a rewrite removes
both first, and then it is the limit the claim gets: no counter may read less."""

from app.application.engine.extended import dra_extended_asks
from app.migration import legacy_asks, plan_pod
from app.policy import default_policy, parse_policy
from tests.helpers import container, pod

RULES = default_policy().migration


def mismatched(resource="nvidia.com/gpu", limit=4, request=1):
    return pod([container("main", {resource: limit}, {resource: request})])


def test_the_planner_the_counters_and_the_rules_read_the_same_amount():
    asked = mismatched()
    plan = plan_pod(asked, RULES, "team-a")
    [template] = plan.templates
    [request] = template["spec"]["spec"]["devices"]["requests"]
    assert {alt["count"] for alt in request["firstAvailable"]} == {4}  # aligned, else any: 4 either way
    assert legacy_asks(asked["spec"], RULES).effective("nvidia.com/gpu") == 4  # quota, rollout, rules
    implicit = "deviceclass.resource.kubernetes.io/gpu.nvidia.com"
    [(_path, _resource, _cls, count)] = dra_extended_asks(mismatched(implicit, 6, 1)["spec"], parse_policy("{}"), {})
    assert count == 6


def test_a_request_alone_is_read_as_written():
    asked = pod([container("main", None, {"nvidia.com/gpu": 2})])
    assert legacy_asks(asked["spec"], RULES).effective("nvidia.com/gpu") == 2


def test_a_claims_devices_are_counted_one_way_by_the_rules_and_the_reports():
    from app import dra
    from app.application.manifests import _whole_gpus
    from app.migration import Plan, PlanStatus

    def template(second: dict) -> dict:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "t", "namespace": "ns"},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "a", "firstAvailable": [{"name": "two", "deviceClassName": "gpu.nvidia.com", "count": 2},
                                                     {"name": "one", "deviceClassName": "gpu.nvidia.com"}]},
                    {"name": "b", "exactly": {"deviceClassName": "gpu.nvidia.com", **second}}]}}}}

    counted = template({"count": 3})
    assert dra.parse_claim_object(counted).most_devices() == 5  # the most an alternative takes, plus 3
    assert _whole_gpus(Plan(PlanStatus.MIGRATED, templates=[counted])) == 5
    every = dra.parse_claim_object(template({"allocationMode": "All"}))
    assert every.most_devices() == 2  # All: the inventory decides, unknown here
    assert every.most_devices(lambda r: 8 if r.mode == "All" else r.count) == 10


def test_whole_devices_of_a_count_ask_are_read_one_way_by_the_planner_and_the_rules():
    from app.application.engine.usage import _counted
    from app.migration import whole_devices

    percent, replicas = RULES.rule_for("koordinator.sh/gpu")[0], RULES.rule_for("nvidia.com/gpu.shared")[0]
    assert (whole_devices(percent, 250), whole_devices(percent, 50), whole_devices(replicas, 4)) == (3, 1, 1)
    policy = default_policy()
    for resource, amount, devices in (("koordinator.sh/gpu", 250, 3), ("nvidia.com/gpu", 2, 2)):
        asked = pod([container("main", {resource: amount})])
        [[request]] = _counted(asked["spec"], policy).requests
        assert request.count == devices
        [template] = plan_pod(asked, RULES, "team-a").templates
        [written] = template["spec"]["spec"]["devices"]["requests"]
        assert {alt.get("count", 1) for alt in written.get("firstAvailable") or [written["exactly"]]} == {devices}
