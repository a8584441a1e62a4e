import base64

import orjson

from app.migration import apply_patch
from app.policy import default_policy, parse_policy
from app.server import admission, mutation
from app.application import PlanCache, planning
from tests.helpers import container, pod, review

POLICY = default_policy()


def request(obj, **kw):
    return admission.parse_review(orjson.dumps(review(obj, **kw)))


def test_pods_of_one_workload_are_planned_once_and_get_the_same_patch():
    cache = PlanCache()
    a, b = pod([container("w", {"nvidia.com/gpu": 1})]), pod([container("w", {"nvidia.com/gpu": 1})])
    b["metadata"]["name"] = "other-replica"
    b["metadata"]["labels"] = {"pod-template-hash": "x"}
    first = mutation.plan_request(request(a), POLICY, {}, cache)
    second = mutation.plan_request(request(b), POLICY, {}, cache)
    assert (cache.misses, cache.hits) == (1, 1)
    assert first.patch == second.patch
    applied = apply_patch(b, second.patch)
    assert applied["metadata"]["name"] == "other-replica"
    assert applied["metadata"]["labels"] == {"pod-template-hash": "x"}


def test_cache_key_covers_spec_annotations_namespace_and_rules():
    cache = PlanCache()
    base = pod([container("w", {"nvidia.com/gpu": 1})])
    annotated = pod([container("w", {"nvidia.com/gpu": 1})])
    annotated["metadata"]["annotations"] = {"nvidia.com/use-gputype": "H100"}
    other_rules = parse_policy("migration:\n  claimName: gpus\n  resources: []\n").migration.model_copy(
        update={"resources": POLICY.migration.resources})
    cache.plan(base, POLICY.migration, "a")
    cache.plan(annotated, POLICY.migration, "a")
    cache.plan(base, POLICY.migration, "b")
    plan, _ = cache.plan(base, other_rules, "a")
    assert cache.misses == 4 and cache.hits == 0
    assert plan.pod["spec"]["resourceClaims"][0]["name"] == "gpus"


def test_cache_is_bounded():
    cache = PlanCache(size=3)
    for n in range(1, 6):
        cache.plan(pod([container("w", {"nvidia.com/gpu": n})]), POLICY.migration, "a")
    assert len(cache._items) == 3


def test_response_for_migrated_pod_carries_patch_warnings_and_audit():
    mp = mutation.plan_request(request(pod([container("w", {"nvidia.com/gpu": 2})])), POLICY, {}, PlanCache())
    resp = mutation.respond(request(pod()), mp)["response"]
    ops = orjson.loads(base64.b64decode(resp["patch"]))
    assert any(o["path"] == "/spec/containers/0/resources/limits" and o["op"] == "remove" for o in ops)
    assert all(w.startswith("dra-bridge: ") and len(w) <= 256 for w in resp["warnings"])
    assert resp["auditAnnotations"]["migration"].startswith("dra-bridge-")


def test_namespace_can_opt_out_of_migration():
    policy = parse_policy("namespaces:\n- names: [legacy]\n  migrate: false\n")
    mp = mutation.plan_request(request(pod(), namespace="legacy"), policy, {}, PlanCache())
    assert mutation.respond(request(pod()), mp)["response"] == {"uid": "uid-1", "allowed": True}


def test_namespace_label_selector_picks_settings():
    policy = parse_policy("namespaces:\n- selector:\n    matchLabels: {tier: prod}\n  onUnmigratable: deny\n")
    bad = pod([container("w", {"nvidia.com/gpu": "1.5"})])
    prod = mutation.plan_request(request(bad), policy, {"tier": "prod"}, PlanCache())
    dev = mutation.plan_request(request(bad), policy, {"tier": "dev"}, PlanCache())
    assert mutation.respond(request(pod()), prod)["response"]["allowed"] is False
    assert mutation.respond(request(pod()), dev)["response"]["allowed"] is True


def test_new_rules_empty_the_cache_so_no_plan_outlives_its_policy():
    cache = PlanCache()
    first = POLICY.migration
    renamed = first.model_copy(update={"claimName": "renamed"})
    p = pod([container("w", {"nvidia.com/gpu": 1})])
    cache.plan(p, first, "a")
    plan, _ = cache.plan(p, renamed, "a")
    assert plan.pod["spec"]["resourceClaims"][0]["name"] == "renamed"
    assert len(cache._items) == 1  # the entries planned under `first` are gone
    plan, _ = cache.plan(p, first, "a")
    assert plan.pod["spec"]["resourceClaims"][0]["name"] == "dra-bridge-gpus"


def with_token_volume(p: dict, suffix: str) -> dict:
    """As the API server hands it to us: a projected token volume of the pod's own name."""
    name = f"kube-api-access-{suffix}"
    p["spec"]["volumes"] = [{"name": "data", "emptyDir": {}},
                            {"name": name, "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}]
    for c in p["spec"]["containers"]:
        c["volumeMounts"] = [{"name": "data", "mountPath": "/data"},
                             {"name": name, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]
    return p


def test_replicas_differing_only_in_their_token_volume_are_one_shape():
    """Issue 22: every pod the API server defaults has a kube-api-access-<random> volume; keyed on
    it, the cache never hit and each pod of a burst was planned afresh."""
    cache = PlanCache()
    replicas = [with_token_volume(pod([container("w", {"nvidia.com/gpu": 2}), container("side")]), s)
                for s in ("abcde", "fghij", "klmno")]
    plans = [mutation.plan_request(request(p), POLICY, {}, cache) for p in replicas]
    assert (cache.misses, cache.hits) == (1, 2)
    for p, mp in zip(replicas, plans):
        alone = mutation.plan_request(request(p), POLICY, {}, PlanCache())  # planned on its own, whole
        assert apply_patch(p, mp.patch) == apply_patch(p, alone.patch)
        assert apply_patch(p, mp.patch)["spec"]["volumes"] == p["spec"]["volumes"]
        assert [c["volumeMounts"] for c in apply_patch(p, mp.patch)["spec"]["containers"]] == \
            [c["volumeMounts"] for c in p["spec"]["containers"]]


def test_a_patch_that_would_replace_whole_containers_is_never_shared():
    cache = PlanCache()
    assert planning._touches_whole_containers(b'[{"op": "replace", "path": "/spec/containers/0", "value": {}}]')
    assert planning._touches_whole_containers(b'[{"op": "add", "path": "/spec/volumes/-", "value": {}}]')
    assert not planning._touches_whole_containers(
        b'[{"op": "remove", "path": "/spec/containers/0/resources/limits"}]')
    p = with_token_volume(pod([container("w", {"nvidia.com/gpu": 1})]), "zzzzz")
    real = planning._plan_and_patch
    try:  # a planner whose patch replaced a container: planned on the whole pod, not cached
        planning._plan_and_patch = lambda view, rules, ns, sharing, whole=None, groups=None: (
            *real(planning._planner_input(whole, strip_volumes=False), rules, ns, sharing)[:2], False)
        cache.plan(p, POLICY.migration, "a")
    finally:
        planning._plan_and_patch = real
    assert cache.misses == 1 and not cache._items
