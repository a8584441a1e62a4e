"""Issue 55, item 1: a replica always starts. Each policy a replica takes is kept in a ConfigMap
beside the admin's; a replica that starts while a refused file is mounted starts on the kept one
(the bundled default where none was ever kept), ready, saying so (status, metric, Event)."""

import time

from app import kube
from app.kube import policy_digest
from app.policy import default_policy
from app.server import Metrics, PolicyHolder
from tests.kube.fakeapi import Fault

GOOD = "rules:\n- name: at-most-4\n  maxDevicesPerPod: 4\n"
BAD = "defaults: {mode: sometimes}\n"
KEPT = ("dra-bridge", "configmaps", "dra-bridge-policy-last-good")


class Events:
    def __init__(self):
        self.posted = []

    def post(self, event_type, reason, message):
        self.posted.append((event_type, reason, message))


def store(fake_kube):
    return kube.LastGoodPolicy(kube.api_client_for_host(fake_kube.url), "dra-bridge", "dra-bridge-policy")


def kept(fake_kube, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = fake_kube.objects.get(KEPT)
        if found is not None:
            return found["data"]
        time.sleep(0.02)
    return None


def test_a_replica_keeps_what_it_takes_and_restarts_on_it_when_the_file_is_refused(fake_kube, tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(GOOD)
    first = PolicyHolder(str(path), Metrics(), Events(), last_good=store(fake_kube))
    assert kept(fake_kube) == {"digest": policy_digest(GOOD), "policy.yaml": GOOD}

    path.write_text(BAD)  # pushed while the policy webhook was down; then every replica restarts
    metrics, events = Metrics(), Events()
    again = PolicyHolder(str(path), metrics, events, last_good=store(fake_kube))
    assert again.digest == first.digest and again.policy.rules[0].name == "at-most-4"
    assert "last good policy kept in ConfigMap dra-bridge/dra-bridge-policy-last-good" in again.status()["source"]
    assert "defaults.mode" in again.status()["rejected"]
    assert "dra_bridge_policy_rejected 1.0" in metrics.render().decode()
    [(kind, reason, message)] = events.posted
    assert (kind, reason) == ("Warning", "PolicyRejected") and again.digest in message
    time.sleep(0.1)
    assert kept(fake_kube)["digest"] == policy_digest(GOOD)  # the refused file is never kept

    path.write_text(GOOD + "# fixed\n")  # the admin fixes it: taken, kept, no longer refused
    time.sleep(0.01)
    assert again.check() and "rejected" not in again.status()
    assert "dra_bridge_policy_rejected 0.0" in metrics.render().decode()
    deadline = time.monotonic() + 5
    while kept(fake_kube)["digest"] != policy_digest(GOOD + "# fixed\n") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert kept(fake_kube)["policy.yaml"] == GOOD + "# fixed\n"


def test_a_cluster_that_never_had_a_good_policy_starts_on_the_bundled_default(fake_kube, tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(BAD)
    holder = PolicyHolder(str(path), Metrics(), Events(), last_good=store(fake_kube))
    assert holder.policy == default_policy()
    assert "no last good policy in ConfigMap dra-bridge/dra-bridge-policy-last-good" in holder.source


def test_a_kept_copy_that_does_not_match_its_digest_is_never_used(fake_kube, tmp_path):
    fake_kube.objects[KEPT] = {"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": KEPT[2], "namespace": "dra-bridge", "resourceVersion": "1"},
                               "data": {"digest": policy_digest(GOOD), "policy.yaml": GOOD.replace("4", "400")}}
    path = tmp_path / "policy.yaml"
    path.write_text(BAD)
    holder = PolicyHolder(str(path), Metrics(), Events(), last_good=store(fake_kube))
    assert holder.policy == default_policy()


def test_an_unreadable_store_starts_on_the_default_and_takes_the_kept_policy_once_it_answers(fake_kube, tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(GOOD)
    PolicyHolder(str(path), Metrics(), Events(), last_good=store(fake_kube))
    assert kept(fake_kube)["digest"] == policy_digest(GOOD)
    path.write_text(BAD)
    fake_kube.faults.append(Fault(status=503, path_contains="last-good", times=1))
    holder = PolicyHolder(str(path), Metrics(), Events(), last_good=store(fake_kube))
    assert holder.policy == default_policy() and "injected fault" in holder.source
    assert holder.check() and holder.digest == policy_digest(GOOD)  # the next check reads it


def test_without_a_store_a_refused_file_still_stops_a_local_run(tmp_path):
    import pytest

    from app.common import PolicyError

    path = tmp_path / "policy.yaml"
    path.write_text(BAD)
    with pytest.raises(PolicyError):
        PolicyHolder(str(path), Metrics())


def test_deleting_the_policy_keeps_its_rules_loudly_and_a_restart_keeps_them_too(fake_kube, tmp_path):
    """Issue 56: `kubectl delete configmap dra-bridge-policy` (or an overlay that forgets it) took
    the replicas to the bundled default: every rule dropped, a log line only. Now the replicas keep
    the last policy they took, saying so (status, metric, Event), across a restart; a fresh cluster
    (nothing kept) still starts quietly on the bundled default."""
    path = tmp_path / "policy.yaml"
    fresh = PolicyHolder(str(path), Metrics(), Events(), optional=True, last_good=store(fake_kube))
    assert fresh.policy.rules == [] and "rejected" not in fresh.status()  # nothing ever kept: quiet
    path.write_text(GOOD)
    metrics, events = Metrics(), Events()
    holder = PolicyHolder(str(path), metrics, events, optional=True, last_good=store(fake_kube))
    assert kept(fake_kube)["digest"] == policy_digest(GOOD)
    path.unlink()
    assert holder.check() is False
    assert holder.policy.rules[0].name == "at-most-4" and holder.digest == policy_digest(GOOD)
    assert "policy ConfigMap was deleted" in holder.status()["rejected"]
    assert "dra_bridge_policy_rejected 1.0" in metrics.render().decode()
    assert events.posted[-1][:2] == ("Warning", "PolicyRejected") and "deleted" in events.posted[-1][2]
    restarted = PolicyHolder(str(path), Metrics(), Events(), optional=True, last_good=store(fake_kube))
    assert restarted.policy.rules[0].name == "at-most-4" and "deleted" in restarted.status()["rejected"]
    path.write_text(GOOD + "# written again\n")
    time.sleep(0.01)
    assert holder.check() and "rejected" not in holder.status()
