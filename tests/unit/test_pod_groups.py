"""KEP-5729 (DRAWorkloadResourceClaims): a pod claim whose name and template equal one of its
PodGroup's claims resolves to the one claim the whole group shares. A rewritten pod asks devices
for itself alone: its claim entry never takes a name its group shares, and where the group was
not read, that is said."""

from app.application import ClusterFacts, KnownClaims, PlanCache, decide_pod
from app.migration import plan_pod
from app.migration.podgroups import own_entry_name
from app.policy import default_policy
from tests.helpers import pod

RULES = default_policy().migration
SHARED = RULES.claimName  # the name the rewrite gives its entry by default


def grouped(group="train"):
    return pod(schedulingGroup={"podGroupName": group})


def group(name="train", *claims):
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"resourceClaims": [{"name": c, "resourceClaimTemplateName": "any"} for c in claims]}}


def entries(plan):
    spec = plan.pod["spec"]
    return ([e["name"] for e in spec["resourceClaims"]],
            sorted({c["name"] for c in spec["containers"][0]["resources"]["claims"]}))


def test_the_entry_avoids_every_name_the_group_shares():
    plan = plan_pod(grouped(), RULES, "team-a", group_claims=frozenset({SHARED, f"{SHARED}-2"}))
    assert entries(plan) == ([f"{SHARED}-3"], [f"{SHARED}-3"])  # the containers name the renamed entry
    assert any(f"PodGroup train shares a claim named {SHARED}" in w for w in plan.warnings)


def test_a_group_that_shares_other_names_keeps_the_usual_entry():
    plan = plan_pod(grouped(), RULES, "team-a", group_claims=frozenset({"dataset"}))
    assert entries(plan) == ([SHARED], [SHARED])
    assert not any("PodGroup" in w for w in plan.warnings)


def test_a_group_not_read_is_said_and_a_pod_in_none_says_nothing():
    unread = plan_pod(grouped(), RULES, "team-a")
    assert entries(unread) == ([SHARED], [SHARED])
    assert any("PodGroup train was not found or not read" in w for w in unread.warnings)
    alone = plan_pod(pod(), RULES, "team-a")
    assert not any("PodGroup" in w for w in alone.warnings)


def test_renamed_entries_stay_dns_labels():
    long = "g" * 63
    assert own_entry_name(long, {long}) == "g" * 61 + "-2"
    assert own_entry_name("a-", {"a-"}) == "a-2"


def test_decide_pod_reads_the_group_through_the_facts_lookup():
    known = KnownClaims([group("train", SHARED)])
    decision = decide_pod(grouped(), "team-a", default_policy(), ClusterFacts(lookup=known.lookup),
                          namespace_labels={})
    assert entries(decision.plan) == ([f"{SHARED}-2"], [f"{SHARED}-2"])
    missing = decide_pod(grouped("other"), "team-a", default_policy(), ClusterFacts(lookup=known.lookup),
                         namespace_labels={})
    assert entries(missing.plan) == ([SHARED], [SHARED])
    assert any("PodGroup other was not found" in w for w in missing.plan.warnings)


def test_the_webhook_cache_never_hands_one_groups_plan_to_another():
    cache = PlanCache()
    shared = cache.plan(grouped(), RULES, "team-a", None, frozenset({SHARED}))[0]
    other = cache.plan(grouped(), RULES, "team-a", None, frozenset())[0]
    assert entries(shared)[0] == [f"{SHARED}-2"]
    assert entries(other)[0] == [SHARED]
