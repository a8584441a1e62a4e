"""Cluster-wide pod reads are consumed a page at a time (issue 48): the webhook's periodic reads
(GPU pod priorities, unmigrated pods, template garbage collection) never hold every pod of a
large cluster decoded at once."""

from app import kube
from app.kube import api_client_for_host


def test_running_pods_are_read_a_page_at_a_time(fake_kube):
    fake_kube.namespaces.update(fleet={}, team={})
    for i in range(1101):
        fake_kube.add_object("fleet" if i % 2 else "team", "pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "fleet" if i % 2 else "team"},
            "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Running"}})
    api = api_client_for_host(fake_kube.url)
    pages_before = fake_kube.pages
    pods = kube.running_pods(api, page_size=500)
    first = next(pods)
    assert first["metadata"]["name"] and fake_kube.pages == pages_before + 1  # one page read so far
    assert 1 + sum(1 for _ in pods) == 1101 and fake_kube.pages == pages_before + 3
    namespaces, opted = kube.opted_in_pods(api, None, page_size=500)
    assert sorted(namespaces) == ["fleet", "team"]
    read = [r for r in fake_kube.requests if r.path.endswith("/pods")]
    assert sum(1 for _ in opted) == 1101
    assert [r for r in fake_kube.requests if r.path.endswith("/pods")][len(read):]  # read as consumed
