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
