"""Service state: policy (reloaded from disk), inventory, TLS, Kubernetes adapters."""

from __future__ import annotations

import logging
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from app import dra
from app.dra import Inventory, build_index
from app.kube import ClaimReader, NamespaceLabels, TemplateStore
from app.application import ClusterFacts, cluster_facts, index_facts, rollout
from app.migration import UNKNOWN_FACTS

if TYPE_CHECKING:
    from app.kube import LiveInventory, TemplateWatch
    from app.migration import Facts, KueueView
    from app.policy import MigrationRules

from .metrics import Metrics
from .policyholder import PolicyHolder
from .decisions import Decisions
from .tls import CertReloader

log = logging.getLogger("dra_bridge.service")


@dataclass(frozen=True)
class KeptFacts:
    """Path facts with what they were built from (decisions kept under them stay valid while
    these do): replaced whole, so review threads never see half of an update."""

    index: dra.Index
    rules: MigrationRules
    kueue: KueueView | None
    facts: Facts
    gpu_pods: tuple | None = None  # what GpuPriorityWatch last read


@dataclass
class Cached:
    """What the service keeps between reviews: the index of a file inventory (with the inventory
    it was built from), the index whose left-out devices were said, and the path facts."""

    index: tuple[Inventory, dra.Index] | None = None
    noted: dra.Index | None = None
    rejected: list[str] = field(default_factory=list)
    facts: KeptFacts | None = None
    states_of: dra.Index | None = None  # the index whose node states the metric shows


@dataclass
class ServiceState:
    policy: PolicyHolder
    templates: TemplateStore
    namespace_labels: NamespaceLabels
    metrics: Metrics
    inventory: Inventory | None = None
    certs: CertReloader | None = None
    reload_interval_s: float = 5.0
    live: LiveInventory | None = None  # when --inventory live
    template_watch: TemplateWatch | None = None  # when there is an API
    kueue: KueueView | None = None  # as KueueWatch last read it (None: not read)
    gpu_pods: tuple | None = None  # the priorities GPU pods run at, as GpuPriorityWatch read them
    cached: Cached = field(default_factory=Cached)
    # Reviews run off the event loop, each gets `review_deadline_s` from its arrival (below the
    # webhook configurations' timeoutSeconds: 5). /mutate and /validate have workers of their own:
    # the API server's /validate of a template we create must never queue behind the /mutate
    # reviews waiting for that create. No review worker waits on the API for a template either.
    review_deadline_s: float = 4.0
    review_workers: int = 4
    executors: dict = field(default_factory=dict)
    decisions: Decisions = field(default_factory=Decisions)
    # SIGTERM: not ready (endpoints drop this replica), every answer closes its connection, so
    # the API server moves to another replica by itself (serve's drain).
    draining: bool = False
    # The claims and templates a pod names (per-pod limits); generated templates are remembered.
    claims: ClaimReader = field(default_factory=lambda: ClaimReader(None))

    def __post_init__(self) -> None:
        for endpoint in ("mutate", "validate"):
            if endpoint not in self.executors:
                self.executors[endpoint] = ThreadPoolExecutor(max_workers=self.review_workers,
                                                              thread_name_prefix=endpoint)
        self.executors.setdefault("validate-policy", ThreadPoolExecutor(max_workers=1, thread_name_prefix="policy"))
        if self.live is not None:  # a full build lets the index before it go at once (issue 48)
            self.live.on_full_build = self.index_replaced

    def index(self):
        """Device index of the inventory, built once per inventory object (live: per change)."""
        if self.live is not None:
            return self._noted(self.live.index())
        kept = self.cached.index
        if kept is None or kept[0] is not self.inventory:
            kept = self.cached.index = (self.inventory, build_index(self.inventory))
        return self._noted(kept[1])

    def _noted(self, index):
        """Devices a new index left out are a metric, a log line and readyz detail, once per index."""
        if self.cached.noted is not index:
            self.cached.noted = index
            rejected = [f"{d}/{p}/{n}: {why}" for d, p, n, why in index.rejected]
            self.cached.rejected = rejected
            self.metrics.rejected_devices.set(len(rejected))
            if rejected:
                log.warning("%d device(s) left out of the inventory: %s", len(rejected), "; ".join(rejected[:5]))
        return index

    def index_replaced(self) -> None:
        """A full build replaced the live index: what is kept per index goes now, not at the next
        review (else a rebuild with no review between holds three indexes: the one kept here,
        the one reviews read, the new one); the new index's left-out devices are said now."""
        self.cached.facts = None
        self.cached.states_of = None
        if self.live is not None:
            self._noted(self.live.index())

    def path_facts(self):
        """What the inventory tells the path choice (native classes, never-satisfiable claims),
        per index; UNKNOWN_FACTS until the inventory is synced (then no pod is judged against it)."""
        known, facts = self.known_path_facts()
        if known:
            return facts
        index, rules, kueue, gpu_pods = self.index(), self.policy.policy.migration, self.kueue, self.gpu_pods
        facts = index_facts(index, rules, dra.TemplateVerdicts(index, "spec").dra, kueue, gpu_pods)
        self.cached.facts = KeptFacts(index, rules, kueue, facts, gpu_pods)
        return facts

    def known_path_facts(self) -> tuple[bool, object]:
        """(True, facts) when `path_facts()` would answer without computing anything: the same
        index, or one that only allocated claims since (its facts carried over but for the
        verdicts, so decisions kept under them stay valid: decisions.Decisions)."""
        if not self.readiness()[1]["inventory"]:
            return True, UNKNOWN_FACTS
        kept = self.cached.facts
        if kept is None or kept.rules is not self.policy.policy.migration or kept.kueue is not self.kueue \
                or kept.gpu_pods is not self.gpu_pods:
            return False, None
        index = self.index()
        if kept.index is index:
            return True, kept.facts
        if kept.index.epoch is not index.epoch:
            return False, None
        kept = self.cached.facts = replace(kept, index=index,
                                           facts=replace(kept.facts, dra=dra.TemplateVerdicts(index, "spec").dra))
        return True, kept.facts

    def cluster_facts(self, path) -> ClusterFacts:
        """The facts a review is decided on (application.cluster_facts): `path` is path_facts(),
        perhaps wrapped to note the verdicts it gives (decisions.recording)."""
        index = self.index()  # the admin rules read it synced or not; the path choice only once synced
        # The source is named, not sized: counting nodes walks the index, and this runs per review.
        where = "live cluster" if self.live is not None else "inventory file"
        return cluster_facts(self.policy.policy, index, source=where, path=path, lookup=self.claims,
                             namespace_claims=self.namespace_claims())

    def namespace_claims(self):
        """namespace -> its ResourceClaims now, from the live inventory's watch; None without one
        (then maxDevicesPerNamespace is not judged)."""
        return self.live.claims_in if self.live is not None else None

    def detail(self) -> dict:
        """What readyz shows beyond its checks: devices the inventory could not use, or none at all."""
        rejected = self.cached.rejected
        out = {"rejectedDevices": rejected[:20], "rejectedDeviceCount": len(rejected)} if rejected else {}
        out["policy"] = self.policy.status()
        index = self.cached.noted
        if index is not None and index.device_count == 0:
            out["deviceCount"] = 0
            out["inventoryWarning"] = "the inventory holds no devices: every claim is judged 'never'"
        return out

    def readiness(self) -> tuple[bool, dict]:
        checks = {
            "certificates": self.certs is None or self.certs.loaded,
            "inventory": self.live.ready if self.live is not None else self.inventory is not None,
        }
        if self.template_watch is not None:  # a fresh replica knows the templates that exist first
            checks["templates"] = self.template_watch.synced.is_set()
        if self.draining:
            checks["serving"] = False  # leaving: no new connections should come here
        return all(checks.values()), checks

    def _count_node_states(self) -> None:
        """dra_bridge_nodes{state}, once per index: every state is set, 0 where no node is in it."""
        index = self.index()
        if self.cached.states_of is index:
            return
        self.cached.states_of = index
        counts = Counter(rollout.index_states(index).values())
        for state in rollout.STATES:
            self.metrics.nodes.labels(str(state)).set(counts.get(state, 0))
        if counts.get(rollout.BOTH):
            log.warning("%d GPU node(s) served by a device plugin and a DRA driver at once: `dra-bridge rollout "
                        "status` names them", counts[rollout.BOTH])

    def tick(self) -> None:
        """One round of background checks (files rotated or replaced)."""
        self.policy.check()
        if self.certs is not None:
            self.certs.check()
            if self.certs.not_after is not None:
                self.metrics.cert_expiry.set(self.certs.not_after)
        ready, checks = self.readiness()
        self.metrics.ready.set(1 if ready else 0)
        for check, passes in checks.items():
            self.metrics.readiness.labels(check).set(1 if passes else 0)
        if self.live is not None and self.live.ready:
            self._count_node_states()
        if self.live is not None:
            now = time.monotonic()
            for resource, since in self.live.failing_since.items():
                self.metrics.inventory_failing.labels(resource).set(0 if since is None else now - since)
