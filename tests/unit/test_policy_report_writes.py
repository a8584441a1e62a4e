"""What `audit --write-reports` says when the server has no PolicyReport CRDs, on every release:
a bare 404 page (through 1.37) and, on 1.38, a Status whose message is that page's text, both
name the CRDs; a missing namespace (a Status naming it) is said as the API says it."""

import orjson
import pytest
from kubernetes.client.exceptions import ApiException

from app.common import ClusterUnreachable
from app.kube import policy_reports

REPORT = {"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReport",
          "metadata": {"name": "dra-bridge-x", "namespace": "clean"}, "results": []}


def answered(body: bytes):
    def send(*_args, **_kwargs):
        exc = ApiException(status=404, reason="")
        exc.body = body
        raise exc
    return send


@pytest.mark.parametrize("body", [
    b"404 page not found\n",  # 1.34 to 1.37
    orjson.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "404 page not found",
                  "reason": "NotFound", "code": 404}),  # 1.38.0-beta.0
    orjson.dumps({"kind": "Status", "message": "the server could not find the requested resource", "code": 404}),
])
def test_a_server_without_the_crds_is_told_to_install_them(monkeypatch, body):
    monkeypatch.setattr(policy_reports, "raw_send", answered(body))
    with pytest.raises(ClusterUnreachable, match="PolicyReport CRDs"):
        policy_reports.write_reports(None, [REPORT])


def test_a_missing_namespace_is_said_as_the_api_says_it(monkeypatch):
    monkeypatch.setattr(policy_reports, "raw_send", answered(orjson.dumps(
        {"kind": "Status", "message": 'namespaces "clean" not found', "reason": "NotFound", "code": 404})))
    with pytest.raises(ClusterUnreachable, match='namespaces "clean" not found'):
        policy_reports.write_reports(None, [REPORT])
