"""Generated malformed and hostile reviews: never a 5xx, always an answer naming the problem."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from starlette.testclient import TestClient

from app import kube
from app.cli import load_inventory
from app.server import Metrics, PolicyHolder, ServiceState, create_app
from tests.http.strategies import RAW_BODIES, claims, forged_claims, forged_pods, pods, reviews

OUTCOMES = {}


@pytest.fixture(scope="module")
def client():
    metrics = Metrics()
    state = ServiceState(policy=PolicyHolder(None, metrics), templates=kube.TemplateStore(None),
                         namespace_labels=kube.NamespaceLabels(None), metrics=metrics, inventory=load_inventory(None))
    with TestClient(create_app(state)) as c:
        yield c


def check(client, path, body):
    r = client.post(path, content=body)
    assert r.status_code in (200, 400, 413), (r.status_code, body[:200])
    payload = r.json()
    if r.status_code == 200:
        sent = json.loads(body)
        assert payload["response"]["uid"] == sent["request"]["uid"]
        assert isinstance(payload["response"]["allowed"], bool)
        # The failure rule must not be what answered: that would be a crash.
        assert not unfinished(payload["response"]), body[:500]
        assert patch_applies(sent["request"].get("object"), payload["response"]), body[:500]
    else:
        assert payload["error"] and "field" in payload
    OUTCOMES[(path, r.status_code)] = OUTCOMES.get((path, r.status_code), 0) + 1


def unfinished(response: dict) -> bool:
    texts = list(response.get("warnings") or []) + [(response.get("status") or {}).get("message", "")]
    return any("internal error" in t or "not finished" in t for t in texts)


def patch_applies(obj, response: dict) -> bool:
    """A patch the API server could not apply to the object it sent would fail the request."""
    if "patch" not in response:
        return True
    import base64

    import jsonpatch
    try:
        jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"])))
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError, IndexError):
        return False
    return True


SETTINGS = dict(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.function_scoped_fixture])


@settings(**SETTINGS)
@given(body=reviews(pods()))
def test_mutate_pods(client, body):
    check(client, "/mutate", body)


@settings(**SETTINGS)
@given(body=reviews(claims()))
def test_validate_claims(client, body):
    check(client, "/validate", body)


@settings(**SETTINGS)
@given(body=reviews(pods()))
def test_validate_pods(client, body):
    check(client, "/validate", body)


@settings(**SETTINGS)
@given(body=reviews(forged_pods()))
def test_mutate_forged_pods(client, body):
    check(client, "/mutate", body)
    check(client, "/validate", body)


@settings(**SETTINGS)
@given(body=reviews(forged_claims()))
def test_validate_forged_claims(client, body):
    check(client, "/validate", body)


@settings(**SETTINGS)
@given(body=RAW_BODIES)
def test_raw_bodies(client, body):
    for path in ("/mutate", "/validate"):
        check(client, path, body)


def test_outcomes_cover_both_answers():
    assert OUTCOMES.get(("/mutate", 200)) and OUTCOMES.get(("/mutate", 400))
    assert OUTCOMES.get(("/validate", 200)) and OUTCOMES.get(("/validate", 400))
