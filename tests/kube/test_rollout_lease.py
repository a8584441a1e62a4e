"""Issue 44: one rollout at a time. The Lease a run or undo holds, against a real HTTP API: a second
command refuses naming the holder; an expired holder's lease is taken only with --force-takeover;
two takers at once never both win (compare-and-swap on the resourceVersion); release frees it."""

import datetime

from app.application.rollout import lease
from app.kube import LeaseStore, api_client_for_host

NOW = datetime.datetime(2026, 12, 6, 12, 0, tzinfo=datetime.timezone.utc)


def holding(fake_kube, me, force=False, at=NOW):
    store = LeaseStore(api_client_for_host(fake_kube.url), "dra-bridge", lease.NAME)
    return lease.Holding(store, me, force, clock=lambda: at)


def test_a_second_rollout_refuses_naming_the_holder_until_the_first_releases(fake_kube):
    first = holding(fake_kube, "alice@host-a pid 1")
    assert first.take() is None
    refused = holding(fake_kube, "bob@host-b pid 2", at=NOW + datetime.timedelta(seconds=30)).take()
    assert refused and "alice@host-a pid 1" in refused and "one rollout at a time" in refused
    assert first.renew() and first.lost is None
    first.release()
    assert holding(fake_kube, "bob@host-b pid 2").take() is None


def test_an_expired_lease_is_taken_only_with_force_takeover(fake_kube):
    assert holding(fake_kube, "alice").take() is None  # then alice dies: nobody renews
    later = NOW + datetime.timedelta(seconds=lease.DURATION_S + 1)
    refused = holding(fake_kube, "bob", at=later).take()
    assert refused and "has expired" in refused and "--force-takeover" in refused
    bob = holding(fake_kube, "bob", force=True, at=later)
    assert bob.take() is None
    alice = holding(fake_kube, "alice", at=later)
    assert alice.renew() is False and "held by bob" in alice.lost  # a late renewal does not steal it back


def test_two_takers_at_once_never_both_win(fake_kube):
    store = LeaseStore(api_client_for_host(fake_kube.url), "dra-bridge", lease.NAME)
    seen = store.read()
    assert store.write(seen, lease.spec_for("alice", NOW)) is True
    assert store.write(seen, lease.spec_for("bob", NOW)) is False  # created meanwhile: 409
    current = store.read()
    assert store.write(current, lease.spec_for("alice", NOW)) is True
    assert store.write(current, lease.spec_for("bob", NOW)) is False  # stale resourceVersion: 409
    assert lease.held_by(store.read()).holder == "alice"


def test_a_killed_command_of_this_machine_leaves_a_lease_its_rerun_takes_at_once(fake_kube):
    from app.kube import gone_from_this_host as _dead_here
    from app.kube import holder_identity as _identity

    import socket
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    killed = f"alice@{socket.gethostname()} pid {gone.stdout.strip()}"
    assert holding(fake_kube, killed).take() is None  # then killed -9: the lease stays, fresh
    assert _dead_here(killed) and not _dead_here(_identity()) and not _dead_here("bob@elsewhere pid 1")
    rerun = lease.Holding(LeaseStore(api_client_for_host(fake_kube.url), "dra-bridge", lease.NAME), _identity(),
                          clock=lambda: NOW, dead=_dead_here)
    assert rerun.take() is None
    other = holding(fake_kube, "bob@elsewhere pid 7", at=NOW)
    assert "another rollout holds" in other.take()


def test_a_node_deleted_mid_wave_is_one_line_naming_it(fake_kube):
    """Issue 44 item 5: the API's Status message, never its raw JSON."""
    import pytest

    from app.common import BridgeError
    from app.kube import NodeWrites

    writes = NodeWrites(api_client_for_host(fake_kube.url))
    for call in (lambda: writes.node("gone"), lambda: writes.patch_node("gone", {"spec": {"unschedulable": True}})):
        with pytest.raises(BridgeError) as failed:
            call()
        said = str(failed.value)
        assert said.startswith("node gone: API answered") and "{" not in said and "\n" not in said, said
