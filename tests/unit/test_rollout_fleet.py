"""Issue 30: rollout plans on fleets that differ from the happy path: MIG and time-sliced nodes,
GPU DaemonSets, pinned pods, bare pods, emptyDir data, Jobs without retries, tainted nodes, and a
status that names every pod in trouble."""

from app.application import rollout
from app.policy import default_policy
from tests.unit.test_rollout import MIGRATE, SWITCHES, cluster, namespace, node, pod, slices, views

DS_TOLERATION = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}


def ds_pod(name, node_name, limits, namespace_="team-a"):
    return pod(name, node_name, limits, namespace=namespace_, owner="DaemonSet/gpu-agent",
               tolerations=[DS_TOLERATION],
               affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                   {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}}})


def dra_node(name, description="h100x8.yaml"):
    return node(name, labels={"nvidia.com/dra-kubelet-plugin": "true"}), slices(name, description=description)


def plan(objects, **kw):
    return rollout.plan_waves(*views(objects), objects.get("poddisruptionbudgets", []), **kw)


def test_a_mig_pod_comes_back_on_dra_only_where_a_dra_node_has_its_profile():
    mig = {"nvidia.com/mig-1g.10gb": "7"}
    d0, d0_slices = dra_node("d0")  # H100s, whole GPUs only
    objects = cluster(nodes=[d0, node("m0", mig), node("m1", mig)], namespaces=[namespace("team-a", MIGRATE)],
                      resourceslices=d0_slices, pods=[pod("mig", "m0", {"nvidia.com/mig-1g.10gb": "1"})])
    [first] = plan(objects, chosen=lambda n: n.name == "m0")
    assert first.back == {"team-a/mig": "plugin, for now"}  # d0 has no 1g.10gb: m1's device plugin has
    # m1 first: once on DRA it serves the MIG devices its device plugin advertised.
    [_m1, m0] = plan(objects)
    assert m0.nodes == ["m0"] and m0.back == {"team-a/mig": "dra"}
    objects["nodes"] = [d0, node("m0", mig)]
    [only] = [w for w in plan(objects) if "m0" in w.nodes]
    assert only.blockers == ["team-a/mig (ReplicaSet/mig-rs, 1 nvidia.com/mig-1g.10gb) would find no room: no node "
                             "left that takes it has 1 nvidia.com/mig-1g.10gb free on either side"]
    a100, a100_slices = dra_node("a100", "a100-mig.yaml")  # publishes 1g.10gb MIG devices
    objects.update(nodes=[a100, node("m0", mig)], resourceslices=a100_slices)
    [moving] = [w for w in plan(objects) if "m0" in w.nodes]
    assert moving.back == {"team-a/mig": "dra"} and not moving.blockers


def test_a_pod_pinned_to_its_node_comes_back_only_there():
    pinned = pod("local", "p0", {"nvidia.com/gpu": "1"}, nodeSelector={"kubernetes.io/hostname": "p0"})
    objects = cluster(nodes=[node("p0", {"nvidia.com/gpu": "8"}), node("p1", {"nvidia.com/gpu": "8"})],
                      namespaces=[namespace("team-a", MIGRATE)], pods=[pinned])
    [wave] = plan(objects, chosen=lambda n: n.name == "p0")
    # No open DRA node yet: recreated while p0 is cordoned, the webhook keeps it on the device plugin.
    assert wave.blockers and wave.blockers[0].startswith("team-a/local (ReplicaSet/local-rs, 1 nvidia.com/gpu) would "
                                                         "find no room: pinned to p0: recreated while p0 is cordoned")
    d0, d0_slices = dra_node("d0")
    objects.update(nodes=objects["nodes"] + [d0], resourceslices=d0_slices)
    [wave] = plan(objects, chosen=lambda n: n.name == "p0")
    assert wave.back == {"team-a/local": rollout.DRA_AFTER} and not wave.blockers
    [_p1, wave] = plan(objects)  # or p1 moves first and is that room
    assert wave.back == {"team-a/local": rollout.DRA_AFTER} and not wave.blockers


def test_a_gpu_daemonset_pod_comes_back_on_dra_on_its_own_node_or_blocks_the_wave():
    objects = cluster(nodes=[node("p0", {"nvidia.com/gpu": "8"}), node("p1", {"nvidia.com/gpu": "8"})],
                      namespaces=[namespace("team-a", MIGRATE), namespace("infra")],
                      pods=[ds_pod("agent-p0", "p0", {"nvidia.com/gpu": "1"})])
    [wave] = [w for w in plan(objects) if "p0" in w.nodes]
    assert wave.back == {"team-a/agent-p0": rollout.DRA_AFTER} and not wave.blockers
    objects["pods"] = [ds_pod("agent-p0", "p0", {"nvidia.com/gpu": "1"}, "infra")]  # not opted in
    [wave] = [w for w in plan(objects) if "p0" in w.nodes]
    assert wave.blockers == ["infra/agent-p0 (DaemonSet/gpu-agent, 1 nvidia.com/gpu) would find no room: a DaemonSet "
                             "pod comes back only on p0, which leaves the device plugin, and the webhook keeps it "
                             "there (its namespace infra is not opted in (dra-bridge.io/migrate=enabled): the "
                             "webhook is not called, the pod is created as written)"]


def test_bare_pods_and_emptydir_data_need_the_operators_consent_as_kubectl_drain():
    objects = cluster(nodes=[node("p0", {"nvidia.com/gpu": "8"}), node("p1", {"nvidia.com/gpu": "8"})],
                      namespaces=[namespace("team-a", MIGRATE)],
                      pods=[pod("bare", "p0", {"nvidia.com/gpu": "1"}, owner=""),
                            pod("scratch", "p0", {"nvidia.com/gpu": "1"}, volumes=[{"name": "s", "emptyDir": {}}])])
    [wave] = [w for w in plan(objects) if "p0" in w.nodes]
    assert [b.split(":")[0] for b in wave.blockers] == ["team-a/bare is a bare pod", "team-a/scratch has emptyDir volumes "
                                                                                      "whose data an eviction deletes"]
    [wave] = [w for w in plan(objects, drain=rollout.Drain(force=True, delete_emptydir_data=True)) if "p0" in w.nodes]
    assert not wave.blockers and wave.back["team-a/bare"] == rollout.LOST
    assert "team-a/bare: a bare pod, evicted and lost (--force)" in wave.notes


def test_evicting_a_job_pod_that_would_exhaust_its_backoff_limit_blocks_the_wave():
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "oneshot", "namespace": "team-a"},
           "spec": {"backoffLimit": 0}, "status": {"active": 1}}
    objects = cluster(nodes=[node("p0", {"nvidia.com/gpu": "8"}), node("p1", {"nvidia.com/gpu": "8"})],
                      namespaces=[namespace("team-a", MIGRATE)], jobs=[job],
                      pods=[pod("oneshot-x", "p0", {"nvidia.com/gpu": "1"}, owner="Job/oneshot")])
    [wave] = [w for w in plan(objects) if "p0" in w.nodes]
    assert wave.blockers == ["Job/oneshot in team-a: evicting 1 of its pod(s) would exceed its backoffLimit (0 more "
                             "failure(s) allowed): the Job would fail (BackoffLimitExceeded); let it finish, raise "
                             "backoffLimit, or give it a podFailurePolicy that ignores DisruptionTarget"]
    job["spec"]["podFailurePolicy"] = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    [wave] = [w for w in plan(objects) if "p0" in w.nodes]
    assert not wave.blockers


def test_a_tainted_node_is_room_only_for_pods_that_tolerate_it():
    tainted = node("p1", {"nvidia.com/gpu": "8"})
    tainted["spec"]["taints"] = [{"key": "team", "value": "b", "effect": "NoSchedule"}]
    objects = cluster(nodes=[node("p0", {"nvidia.com/gpu": "8"}), tainted],
                      namespaces=[namespace("other")],  # not opted in: stays on the device plugin
                      pods=[pod("a", "p0", {"nvidia.com/gpu": "1"}, namespace="other")])
    [wave] = plan(objects, chosen=lambda n: n.name == "p0")
    assert wave.blockers and "no node left that takes it" in wave.blockers[0]
    objects["pods"] = [pod("a", "p0", {"nvidia.com/gpu": "1"}, namespace="other",
                           tolerations=[{"key": "team", "operator": "Equal", "value": "b", "effect": "NoSchedule"}])]
    [wave] = plan(objects, chosen=lambda n: n.name == "p0")
    assert wave.back == {"other/a": "plugin"} and not wave.blockers


def test_the_path_a_rollout_plans_is_the_webhooks_decision():
    from app.application import decide_pod
    from app.migration.unmigrated import recreated
    objects = cluster(nodes=[node("p0", {"nvidia.com/gpu": "8"})],
                      namespaces=[namespace("team-a", MIGRATE), namespace("off", MIGRATE), namespace("other")],
                      pods=[pod("a", "p0", {"nvidia.com/gpu": "1"}), pod("b", "p0", {"nvidia.com/gpu": "1"}, "off"),
                            pod("c", "p0", {"nvidia.com/gpu": "1"}, "other")])
    from app.policy import parse_policy
    policy = parse_policy("namespaces:\n- names: ['off']\n  migrate: false\n")
    pods = {p.name: p for p in rollout.pod_views(objects, policy, SWITCHES)}
    for p in objects["pods"]:
        ns = p["metadata"]["namespace"]
        labels = next(n["metadata"]["labels"] for n in objects["namespaces"] if n["metadata"]["name"] == ns)
        found = decide_pod(recreated(p), ns, policy, namespace_labels=labels, opt_in=rollout.pods.DEFAULT_OPT_IN)
        assert (pods[p["metadata"]["name"]].path == "dra") == (found.outcome.value == "rewrite")
    assert pods["b"].why == "migration disabled for this namespace (policy migrate: false)"
    assert "not opted in" in pods["c"].why


def test_status_counts_and_names_every_pod_in_trouble():
    d0, d0_slices = dra_node("d0")
    deployment = {"kind": "Deployment", "metadata": {"name": "infer", "namespace": "team-a"},
                  "spec": {"replicas": 3, "template": {"spec": {"containers": [
                      {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}
    objects = cluster(nodes=[d0, node("p0", {"nvidia.com/gpu": "8"})], resourceslices=d0_slices,
                      namespaces=[namespace("team-a", MIGRATE)],
                      pods=[pod("infer-1", "p0", {"nvidia.com/gpu": "1"}, owner="ReplicaSet/infer-abc",
                                labels={"pod-template-hash": "abc"}),
                            pod("stale", "d0", {"nvidia.com/gpu": "1"}),  # a plugin pod on a node now on DRA
                            pod("waiting", None, {"nvidia.com/gpu": "1"}),
                            pod("claimed", None, None, claims="c-1")],
                      resourceclaims=[{"metadata": {"name": "c-1", "namespace": "team-a"}, "status": {}}])
    objects["pods"][3]["status"] = {"phase": "Pending"}
    nodes, pods = views(objects)
    found = rollout.summary(nodes, pods, [deployment], rollout.bound_by_owner(objects["pods"]),
                            default_policy().migration)
    assert found["pods"]["pluginNotAdvertised"] == 1
    assert found["named"]["pluginNotAdvertised"] == ["team-a/stale"]
    assert found["named"]["pendingLegacy"] == ["team-a/waiting"]
    assert found["named"]["pendingClaims"] == ["team-a/claimed"]
    assert found["workloadsShort"] == {"Deployment team-a/infer": "1 of 3 pod(s) bound"}
    assert all(key.isidentifier() for part in ("pods", "named") for key in found[part])
    assert rollout.in_trouble(found)


def test_a_wave_stopped_midway_is_listed_as_stopped_with_the_command_that_continues_it():
    objects = cluster(nodes=[node("u0", {"nvidia.com/gpu": "8"}, annotations={
                                 rollout.WAVE: "1", rollout.STEP: "undo-evicted", rollout.BEFORE: "{}"}),
                             node("r0", {"nvidia.com/gpu": "8"}, annotations={
                                 rollout.WAVE: "2", rollout.STEP: "flipped", rollout.BEFORE: "{}"})])
    undoing, running = plan(objects)[:2]
    assert undoing.stuck and not undoing.done
    assert undoing.notes == ["u0: stopped at step undo-evicted: `rollout undo --wave 1` continues it"]
    assert running.notes == ["r0: stopped at step flipped: `rollout run --wave 2` continues it, `rollout undo "
                             "--wave 2` takes it back (evicting the pods already on its DRA side)"]


def test_a_run_a_budget_stopped_before_the_flip_offers_an_undo_that_evicts_nothing():
    objects = cluster(nodes=[node("c0", {"nvidia.com/gpu": "8"}, annotations={
        rollout.WAVE: "1", rollout.STEP: "cordoned", rollout.BEFORE: "{}"})])
    [stopped] = plan(objects)[:1]
    assert stopped.notes == ["c0: stopped at step cordoned: `rollout run --wave 1` continues it once what stopped it "
                             "allows (a budget, a pod leaving), or `rollout undo --wave 1` uncordons it: nothing has "
                             "moved yet, nothing is evicted again (it refuses while a pod already evicted could then never run)"]


def test_a_pod_comes_back_on_dra_only_on_a_node_whose_devices_our_feasibility_check_says_serve_it():
    from app.application import snapshot_facts
    from app.reporter import render
    d0, d0_slices = dra_node("d0")  # H100s on DRA, room for it by count
    typed = pod("a100", "p0", {"nvidia.com/gpu": "1"})
    typed["metadata"]["annotations"] = {"nvidia.com/use-gputype": "A100"}
    objects = cluster(nodes=[d0, node("p0", {"nvidia.com/gpu": "8"}), node("p1", {"nvidia.com/gpu": "8"})],
                      namespaces=[namespace("team-a", MIGRATE)], deviceclasses=render.device_classes(),
                      resourceslices=d0_slices + slices("p0", "shadow", "a100-mig.yaml")
                      + slices("p1", "shadow", "a100-mig.yaml"), pods=[typed])
    policy = default_policy()
    facts, fits = snapshot_facts(objects, policy)
    nodes, _ = views(objects)
    pods = rollout.pod_views(objects, policy, SWITCHES, facts)
    assert pods[0].path == "dra" and pods[0].templates  # belongs on DRA (only shadowed nodes have A100s now)
    [counted] = rollout.plan_waves(nodes, pods, [], chosen=lambda n: n.name == "p0")
    assert counted.back == {"team-a/a100": "dra"}  # by count alone, d0's H100s would take it
    [checked] = rollout.plan_waves(nodes, pods, [], chosen=lambda n: n.name == "p0", fits=fits)
    assert checked.back == {"team-a/a100": "plugin, for now"}  # d0 has no A100: p1's device plugin for now
    assert fits(pods[0], "p1") and not fits(pods[0], "d0")


def test_a_pod_pinned_by_its_local_volume_is_placed_only_on_that_node():
    """Issue 44: a StatefulSet pod whose claim binds a local PersistentVolume (no nodeSelector)
    can only come back on the volume's node: the plan must not send it to another node's plugin."""
    db = pod("db-0", "p0", {"nvidia.com/gpu": "1"}, owner="StatefulSet/db")
    db["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}]
    pvc = {"metadata": {"name": "data-db-0", "namespace": "team-a"}, "spec": {"volumeName": "local-p0"}}
    pv = {"metadata": {"name": "local-p0"}, "spec": {"local": {"path": "/mnt/disk"}, "nodeAffinity": {"required": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["p0"]}]}]}}}}
    objects = cluster(nodes=[node("p0", {"nvidia.com/gpu": "8"}), node("p1", {"nvidia.com/gpu": "8"})],
                      namespaces=[namespace("team-a", MIGRATE)], pods=[db], persistentvolumeclaims=[pvc],
                      persistentvolumes=[pv])
    [view] = views(objects)[1]
    assert view.pinned == "p0"
    [wave] = plan(objects, chosen=lambda n: n.name == "p0")
    assert wave.blockers and "pinned to p0" in wave.blockers[0], wave.blockers  # no DRA node: it would wait
    d0, d0_slices = dra_node("d0")
    objects.update(nodes=objects["nodes"] + [d0], resourceslices=d0_slices)
    [wave] = plan(objects, chosen=lambda n: n.name == "p0")
    assert wave.back == {"team-a/db-0": rollout.DRA_AFTER} and not wave.blockers  # back on p0, on DRA
    objects.update(persistentvolumes=[], persistentvolumeclaims=[])
    [wave] = plan(objects, chosen=lambda n: n.name == "p0")
    assert wave.back == {"team-a/db-0": rollout.DRA_BACK}  # without the volume it may go to d0


def test_a_pending_or_gated_pod_blocks_the_wave_that_moves_the_last_node_that_could_take_it():
    waiting = pod("queued", None, {"nvidia.com/gpu": "2"}, namespace="batch", nodeSelector={"pool": "a"},
                  schedulingGates=[{"name": "kueue.x-k8s.io/admission"}])
    waiting["status"] = {"phase": "Pending"}
    nodes = [node("p0", {"nvidia.com/gpu": "8"}, labels={"pool": "a"}), node("p1", {"nvidia.com/gpu": "8"}),
             node("p2", {"nvidia.com/gpu": "8"}, labels={"pool": "a"})]
    objects = cluster(nodes=nodes, namespaces=[namespace("batch")], pods=[waiting])
    waves = {w.nodes[0]: w for w in plan(objects)}
    assert not waves["p0"].blockers and not waves["p1"].blockers  # p2 can still take it
    assert waves["p2"].blockers == [
        "batch/queued (Pending, held by scheduling gates kueue.x-k8s.io/admission, 2 nvidia.com/gpu) was admitted "
        "asking the device plugin; wave 3 moves the last node(s) that could take it (p2): keep a node that takes it "
        "on the device plugin (--nodes), or let it finish first"]
    objects["namespaces"] = [namespace("batch", MIGRATE)]  # its owner's new pod would be rewritten
    [blocker] = {w.nodes[0]: w for w in plan(objects)}["p2"].blockers
    assert blocker.endswith("(p2): delete it before this wave: its owner's new pod is rewritten onto DRA")
    objects["nodes"] = [node("p0", {"nvidia.com/gpu": "1"}, labels={"pool": "a"}), nodes[1]]
    assert not any(w.blockers for w in plan(objects))  # no node ever could: not a wave's doing


def test_status_wide_names_every_pod_in_trouble_not_the_first_five():
    """Issue 55: `-o wide` on rollout status: every pod of a state in trouble, not rollout.NAMED."""
    objects = cluster(nodes=[node("p0", {"nvidia.com/gpu": "8"})], namespaces=[namespace("team-a", MIGRATE)],
                      pods=[pod(f"waiting-{i}", None, {"nvidia.com/gpu": "1"}) for i in range(8)])
    nodes, pods = views(objects)
    cut = rollout.summary(nodes, pods, [], {}, default_policy().migration)
    every = rollout.summary(nodes, pods, [], {}, default_policy().migration, named=None)
    assert cut["pods"]["pendingLegacy"] == every["pods"]["pendingLegacy"] == 8
    assert len(cut["named"]["pendingLegacy"]) == rollout.NAMED < 8
    assert every["named"]["pendingLegacy"] == sorted(f"team-a/waiting-{i}" for i in range(8))
