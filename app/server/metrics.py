"""Prometheus metrics, one registry per service instance (tests run several)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

def set_series(gauge: Gauge, previous: set[tuple], values: dict[tuple, float]) -> set[tuple]:
    """Each labelled series to its value, and those `previous` had that `values` has not removed
    (their object is gone); the label sets now exported, for the next round."""
    for labels in previous - set(values):
        gauge.remove(*labels)
    for labels, value in values.items():
        gauge.labels(*labels).set(value)
    return set(values)


LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("dra_bridge_admission_requests_total", "Admission reviews answered",
                                ["endpoint", "kind", "outcome"], registry=self.registry)
        self.latency = Histogram("dra_bridge_admission_duration_seconds", "Time to answer a review",
                                 ["endpoint"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.migrations = Counter("dra_bridge_migrations_total", "Pods planned, by result",
                                  ["result"], registry=self.registry)
        self.path_choices = Counter("dra_bridge_path_choices_total",
                                    "Pods left as they are, by path (native, legacy) and why: policy, bound, "
                                    "scheduler, native, share, kueue, quota, preemption, dra-busy, dra-shadow, "
                                    "dra-cordoned, dra-twice, dra-never",
                                    ["path", "reason"], registry=self.registry)
        self.validations = Counter("dra_bridge_validations_total", "Claims and pods validated",
                                   ["kind", "result", "mode"], registry=self.registry)
        self.violations = Counter("dra_bridge_policy_violations_total",
                                  "Violations found by /validate, by namespace, rule (upstream: what the API server or "
                                  "scheduler would refuse) and strongest action", ["namespace", "rule", "action"],
                                  registry=self.registry)
        self.template_errors = Counter("dra_bridge_template_ensure_errors_total",
                                       "ResourceClaimTemplate creations the API did not confirm",
                                       registry=self.registry)
        self.templates_created = Counter("dra_bridge_template_ensure_calls_total",
                                         "ResourceClaimTemplate creations: create calls made to the API (in demo mode, in memory)",
                                         registry=self.registry)
        self.dropped_fields = Counter("dra_bridge_dropped_fields_total",
                                      "Fields the API server dropped from objects we wrote (their DRA feature gate is "
                                      "off there); such a template is removed, never used", ["kind", "gate"],
                                      registry=self.registry)
        self.template_conflicts = Counter("dra_bridge_template_conflicts_total",
                                          "Templates of a generated name found with content we did not generate "
                                          "(never used)", registry=self.registry)
        self.templates_collected = Counter("dra_bridge_templates_collected_total",
                                           "Generated templates deleted after no pod named them for the grace period",
                                           registry=self.registry)
        self.template_forgets = Counter("dra_bridge_template_cache_forgets_total",
                                        "Templates deleted by anyone, forgotten by the ensure-cache", registry=self.registry)
        self.template_gc_leader = Gauge("dra_bridge_template_gc_leader", "1 while this replica holds the collector lease",
                                        registry=self.registry)
        self.policy_reload_errors = Counter("dra_bridge_policy_reload_errors_total",
                                            "Policy files rejected on reload", registry=self.registry)
        self.policy_info = Gauge("dra_bridge_policy_info", "The policy this replica enforces: its digest (a label), "
                                 "the value when it was loaded (Unix time)", ["digest"], registry=self.registry)
        self.policy_rejected = Gauge("dra_bridge_policy_rejected", "1 while the policy file on disk is refused "
                                     "(the last good policy stays in force)", registry=self.registry)
        self.admission_policies_failing = Gauge(
            "dra_bridge_admission_policies_failing", "1 while this replica, holding the lease, cannot write the "
            "policy's compiled ValidatingAdmissionPolicies (nothing enforces them while the webhook is down)",
            registry=self.registry)
        self.rejected_devices = Gauge("dra_bridge_inventory_rejected_devices",
                                      "Devices left out of the inventory index for a value they cannot be used with",
                                      registry=self.registry)
        self.internal_errors = Counter("dra_bridge_unfinished_reviews_total",
                                       "Reviews answered by the failure rule: internal error, deadline, namespace unknown",
                                       ["endpoint", "reason"], registry=self.registry)
        self.ready = Gauge("dra_bridge_ready", "1 when certificates and inventory are loaded",
                           registry=self.registry)
        self.readiness = Gauge("dra_bridge_readiness_check", "Each readiness check: 1 passes, 0 fails",
                               ["check"], registry=self.registry)
        self.cert_expiry = Gauge("dra_bridge_serving_certificate_expiry_timestamp_seconds",
                                 "When the serving certificate in use expires (Unix time)", registry=self.registry)
        self.inventory_failing = Gauge("dra_bridge_inventory_watch_failing_seconds",
                                       "How long the live inventory's list/watch of a resource has been failing "
                                       "(0: it works)", ["resource"], registry=self.registry)
        self.fast_path = Counter("dra_bridge_fast_path_total",
                                 "Pod creations at /mutate under a policy that allows the fast path: reused (answered "
                                 "on the event loop from an earlier replica's decision), or why a worker decided: "
                                 "facts (the inventory changed beyond allocations), basis, unseen (a new shape), "
                                 "verdict (an allocation changed a verdict it read), dear (its verdicts cost too much "
                                 "to judge again on the event loop)", ["result"], registry=self.registry)
        self.unmigrated = Gauge("dra_bridge_unmigrated_pods",
                                "Running pods in opted-in namespaces still on device-plugin GPUs that the webhook "
                                "would rewrite now (admitted while it was unreachable), by their namespace (not "
                                "`namespace`: Prometheus gives that label the scraped replica's)",
                                ["pod_namespace"], registry=self.registry)
        self.unmigrated_counted = Gauge("dra_bridge_unmigrated_pods_counted_timestamp_seconds",
                                        "When dra_bridge_unmigrated_pods was last counted (Unix time)",
                                        registry=self.registry)
        self.nodes = Gauge("dra_bridge_nodes", "GPU nodes per state, by what each does (the live inventory): plugin, "
                           "dra, both (device plugin and DRA driver at once: a GPU could be handed out twice), "
                           "neither (a GPU node nothing serves), unknown (its kubelet reports it not Ready); moving is "
                           "only `rollout status`'s", ["state"], registry=self.registry)
        self.budget_escaped = Gauge("dra_bridge_budget_escaped_devices",
                                    "Devices ResourceClaims hold that no key of their namespace's GPU ResourceQuota "
                                    "counts (it limits requests.<resource> only, and their DeviceClass declares "
                                    "no extendedResourceName for it), by namespace and quota",
                                    ["pod_namespace", "quota"], registry=self.registry)
        self.queue_budget_escaped = Gauge("dra_bridge_queue_budget_escaped_devices",
                                          "Devices the running pods of a Kueue ClusterQueue hold for a GPU resource "
                                          "that the queue's quota does not count (claims of a DeviceClass Kueue does "
                                          "not map to it, or beyond what Kueue reserved), by queue and resource",
                                          ["cluster_queue", "resource"], registry=self.registry)
        self.kueue_read_failures = Counter("dra_bridge_kueue_read_failures_total",
                                           "Rounds that could not read Kueue's configuration (ConfigMap "
                                           "kueue-manager-config, its manager Deployment; pods Kueue admits by "
                                           "itself are then rewritten only onto migration.kueueDeviceClasses) or "
                                           "its queues (queue budgets not judged that round)",
                                           registry=self.registry)
        self.unmigrated_failures = Counter("dra_bridge_unmigrated_count_failures_total",
                                           "Counts of unmigrated pods that could not read the pods", registry=self.registry)

    def render(self) -> bytes:
        return generate_latest(self.registry)


# Request strings become label values only from this closed set: a forged kind cannot grow /metrics.
KNOWN_KINDS = frozenset({"Pod", "ResourceClaim", "ResourceClaimTemplate"})


def metrics_kind(kind: str) -> str:
    return kind if kind in KNOWN_KINDS else ("" if not kind else "other")
