"""Each release's allocator (issue 54): generated cases judged by the oracle built against that
release's k8s.io/dynamic-resource-allocation with its default gates, and by our check with the
index following that release, every case read as the release's API server stores it (the fields
of its gates that are off dropped; a claim it would refuse is left out). Every case agrees, or
the failing one is printed; before 1.36 a case whose outcome hangs on upstream's random pool
order is counted, not compared (order_matters)."""

import pytest
from hypothesis import HealthCheck, given, settings

from app import dra
from app.dra import search
from app.dra.selection import Selection
from app.common import release as releases
from tests.upstream import generators, judge
from tests.upstream.oracle import Oracle, OracleUnavailable, build
from tests.upstream.report import record, skipped

pytestmark = pytest.mark.timeout(1800)  # each release's oracle builds cold in a minute or two

SETTINGS = settings(max_examples=1000, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module", params=["1.34", "1.35", "1.36"])
def release_oracle(request):
    try:
        binary = build(request.param)
    except OracleUnavailable as exc:
        pytest.skip(str(exc))
    oracle = Oracle(binary)
    yield releases.parse(request.param, "test"), oracle
    oracle.close()


def as_stored(case: dict, release: releases.Release) -> dict | None:
    """The case as the release's API server holds it; None where it would refuse the claim (a
    request left with neither exactly nor firstAvailable) or could not hold what is allocated
    (shares without consumable capacity), or would refuse a slice (list-typed attributes without
    DRAListTypeAttributes: the value is dropped, the attribute left empty)."""
    claim = releases.strip(case["claims"][0], release, "ResourceClaim")[0]
    if any("exactly" not in r and "firstAvailable" not in r for r in claim["spec"]["devices"]["requests"]):
        return None
    if case.get("allocated_claims") and not release.has(releases.CONSUMABLE_CAPACITY):
        return None
    if not release.has(releases.LIST_TYPE_ATTRIBUTES) and any(  # a slice its API server refuses
            kind in value for s in case["slices"] for d in s["spec"].get("devices") or []
            for value in (d.get("attributes") or {}).values() for kind in ("ints", "bools", "strings", "versions")):
        return None
    return {**case, "claims": [claim],
            "slices": [releases.strip(s, release, "ResourceSlice")[0] for s in case["slices"]],
            "classes": [releases.strip(c, release, "DeviceClass")[0] for c in case["classes"]]}


def ours(case: dict, release: releases.Release) -> tuple[str, str]:
    nodes = {n["metadata"]["name"]: dict(n["metadata"].get("labels") or {}) for n in case["nodes"]}
    inventory = dra.Inventory(slices=case["slices"], classes={c["metadata"]["name"]: c for c in case["classes"]},
                              nodes=nodes, release=release)
    holders = case.get("allocated_claims") or []
    allocated = {(a["driver"], a["pool"], a["device"]) for a in case["allocated"]} | dra.allocated_devices(holders)
    try:
        index = dra.build_index(inventory, allocated, dra.allocated_capacity(holders), dra.shared_devices(holders))
        verdict = dra.check(dra.parse_claim_spec(case["claims"][0]["spec"]), index)
    except dra.ClaimError as exc:
        return "error", f"ClaimError: {exc}"
    except Exception as exc:  # a crash is a disagreement to report, not a test error
        return "crash", f"{type(exc).__name__}: {exc}"
    return judge.OUR_TO_ORACLE[verdict.status], f"{verdict.status}: {verdict.message}"


def order_matters(case: dict, release: releases.Release) -> bool:
    """Before 1.36 the allocator walks a node's pools in Go map order, a new one each time: where a
    selector errors on some device (the search stops there, or finds devices first), on 1.34 a
    pool is invalid (an error where the search reaches it), or an All subrequest after the first
    continues with the first subrequest's devices from its second on (which ones: the order's),
    its outcome is a matter of luck."""
    inventory = dra.Inventory(slices=case["slices"], classes={c["metadata"]["name"]: c for c in case["classes"]},
                              release=release)
    index = dra.build_index(inventory)
    if release.minor < 35 and index.invalid_pools:
        return True
    try:
        spec = dra.parse_claim_spec(case["claims"][0]["spec"])
    except dra.ClaimError:
        return False
    if any(len(row) > 1 and any(r.mode == "All" for r in row[1:]) for row in spec.requests):
        return True  # an All subrequest after the first goes on with the first one's devices in map order
    selection = Selection(index)
    requests = [r for alternatives in spec.requests for r in alternatives if r.device_class in index.classes]
    for request in requests:
        selection.prepare(request)
    for request in requests:
        for p in range(len(index.devices)):
            try:
                selection(request, p)
            except search.AllocationError:
                return True
    return False


def test_generated_cases_agree_with_each_releases_allocator(release_oracle):
    release, oracle = release_oracle

    @SETTINGS
    @given(generators.case())
    def check(case):
        stored = as_stored(case, release)
        if stored is None:
            return
        if release.minor < 36 and order_matters(stored, release):
            skipped(f"release {release.version}, outcome left to upstream's random pool order")
            return
        answer = oracle.ask(judge.oracle_allocate_request(stored, nodes=stored["nodes"]))
        theirs = judge.scheduler_outcome(answer, stored)
        mine, message = ours(stored, release)
        record(f"release {release.version}", mine == theirs, "")
        errors = [n["error"] for n in answer["nodes"] if n["error"]]
        assert mine == theirs, (f"Kubernetes {release.version}: ours {mine} ({message}) vs upstream {theirs} "
                                f"{errors[:1]}\n{judge.case_yaml(stored)}")

    check()


def test_incomplete_pools_as_each_release_allocates(release_oracle):
    """The rule that moved: 1.34 allocates exact counts from an incomplete pool, 1.35+ does not."""
    release, oracle = release_oracle
    incomplete = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
                  "spec": {"driver": "d.example.com", "nodeName": "n1", "devices": [{"name": "a"}],
                           "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 2}}}
    case = {"slices": [incomplete], "allocated": [], "nodes": [{"metadata": {"name": "n1"}}],
            "classes": [{"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": "true"}}]}}],
            "claims": [{"metadata": {"name": "c", "uid": "u"}, "spec": {"devices": {"requests": [
                {"name": "r", "exactly": {"deviceClassName": "gpu"}}]}}}]}
    theirs = judge.scheduler_outcome(oracle.ask(judge.oracle_allocate_request(case, nodes=case["nodes"])), case)
    assert theirs == ("satisfiable" if release.minor == 34 else "unsatisfiable")
    assert ours(case, release)[0] == theirs
