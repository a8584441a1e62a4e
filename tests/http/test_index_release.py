"""Issue 48: a full build of the live index must not leave the index before it held by the
service's per-index caches (path facts, node-state metric, left-out devices) until a review
comes: a rebuild would then hold three indexes at once."""

import gc
import weakref

from app import kube
from app.dra import LiveIndex
from app.kube import LiveInventory, api_client_for_host
from app.server import Metrics, PolicyHolder, ServiceState
from tests.kube.test_live_inventory import CLASS, eventually, slice_obj


def test_a_full_build_lets_the_index_before_it_go(fake_kube):
    for node in ("n1", "n2"):
        fake_kube.add_cluster_object("resourceslices", slice_obj(f"{node}-s", node, 2))
    fake_kube.add_cluster_object("deviceclasses", CLASS)
    live = LiveInventory(api_client_for_host(fake_kube.url), LiveIndex, watch_timeout_s=5, backoff_s=0.1,
                         rebuild_interval_s=0).start()
    metrics = Metrics()
    state = ServiceState(policy=PolicyHolder(None, metrics), templates=kube.TemplateStore(None),
                         namespace_labels=kube.NamespaceLabels(None), metrics=metrics, live=live)
    # Issue 57: the state serve builds wires itself; this test no longer does it for serve.
    assert live.on_full_build == state.index_replaced
    try:
        assert live.wait_synced(5)
        eventually(lambda: live.builds >= 1 and live.index().device_count == 4)
        first = live.index()
        assert state.path_facts() is state.path_facts()  # kept for this index
        state._count_node_states()
        held = weakref.ref(first)
        del first
        fake_kube.add_cluster_object("deviceclasses", {**CLASS, "metadata": {"name": "other"}})  # a full build
        eventually(lambda: "other" in live.index().classes)
        gc.collect()
        assert held() is None, [type(r).__name__ for r in gc.get_referrers(held())]
        assert state.cached.noted is live.index()  # the new index's left-out devices were said
        state.path_facts()
        assert state.cached.facts.index is live.index()  # facts are built again for the new one
    finally:
        live.stop()
