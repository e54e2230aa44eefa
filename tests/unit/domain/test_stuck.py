"""Stuck despite capacity: a tier's head that fits on a node's free GPUs, CPU and memory yet waits."""

from __future__ import annotations

from typing import Any

from tests.unit.domain.helpers import NS, POLICY, T0, apply, evaluate, paddle_owner, state_of
from watchtower.domain.state import ClusterState
from watchtower.domain.stuck import stuck_heads
from watchtower.simulator import objects as o

MIN = 60.0
MSG = "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."


def _cluster(*extra: dict[str, Any]) -> ClusterState:
    # node-a: 8 GPUs, but a running pod takes 92 of its 96 CPUs; node-b: 4 of 8 GPUs free.
    return state_of(
        o.node("node-a"),
        o.node("node-b"),
        o.pod(
            name="busy-a", namespace=NS, created=T0 - 3600, gpus=0, cpu="92", node="node-a", phase="Running"
        ),
        o.pod(name="busy-b", namespace=NS, created=T0 - 3600, gpus=4, node="node-b", phase="Running"),
        *extra,
    )


def _head(waited: float, *, gpus: int = 4, cpu: str = "8", conditions=None, **kw: Any) -> dict[str, Any]:
    return o.pod(
        name="train-0",
        namespace=NS,
        created=T0 - waited,
        gpus=gpus,
        cpu=cpu,
        priority=500_000,
        conditions=conditions,
        **kw,
    )


def _stuck(state: ClusterState, *, now: float = T0, last_bound=None):
    snap = evaluate(state, now)
    return stuck_heads(
        snap, state, stuck_after=10 * MIN, selector=POLICY.selector, last_bound=last_bound or {}
    )


def test_a_head_that_fits_and_waited_11_minutes_is_stuck_with_the_schedulers_words() -> None:
    st = _cluster(_head(11 * MIN, conditions=[o.unschedulable(T0 - 10 * MIN, MSG)]))
    [s] = _stuck(st)
    assert (s.status.name, s.status.tier, s.node, s.pod) == ("train-0", "medium", "node-b", "train-0")
    assert s.said == MSG
    assert s.why == f"fits on node node-b by free GPUs, CPU and memory, yet the scheduler says: {MSG}"


def test_nine_minutes_is_not_stuck_yet() -> None:
    st = _cluster(_head(9 * MIN, conditions=[o.unschedulable(T0 - 8 * MIN, MSG)]))
    assert _stuck(st) == ()


def test_a_head_that_fits_nowhere_is_not_stuck() -> None:
    # 5 GPUs: node-b has 4 free; node-a has 8 free GPUs but only 4 CPUs for the pod's 8.
    st = _cluster(_head(30 * MIN, gpus=5))
    assert _stuck(st) == ()


def test_cpu_and_memory_of_bound_pods_count_terminating_ones_included() -> None:
    # node-b's last 4 GPUs are held by a terminating pod: it holds them until it is gone.
    st = _cluster(
        _head(30 * MIN),
        o.pod(
            name="going",
            namespace=NS,
            created=T0 - 3600,
            gpus=4,
            node="node-b",
            phase="Running",
            deletion=T0 - 60,
        ),
    )
    assert _stuck(st) == ()
    apply(st, o.pod(name="going", namespace=NS, created=T0 - 3600, gpus=4, node="node-b", phase="Succeeded"))
    assert [s.node for s in _stuck(st)] == ["node-b"]


def test_a_cordoned_node_is_no_room() -> None:
    st = _cluster(_head(30 * MIN))
    apply(st, o.node("node-b", unschedulable_=True))
    assert _stuck(st) == ()


def test_no_condition_says_the_scheduler_has_said_nothing_and_names_likely_causes() -> None:
    st = _cluster(_head(11 * MIN))
    [s] = _stuck(st, last_bound={"": T0 - 25 * MIN})
    assert s.said == ""
    assert s.causes == ("default-scheduler last bound a pod 25m ago: if that is long, is it running?",)
    assert s.why == (
        "fits on node node-b by free GPUs, CPU and memory, yet the scheduler has said nothing about it "
        "(no PodScheduled condition); likely: default-scheduler last bound a pod 25m ago: if that is "
        "long, is it running?"
    )


def test_an_unknown_scheduler_name_is_named() -> None:
    head = _head(11 * MIN)
    head["spec"]["schedulerName"] = "my-gang-scheduler"
    [s] = _stuck(_cluster(head))
    assert s.scheduler == "my-gang-scheduler"
    assert s.causes == (
        'its schedulerName "my-gang-scheduler" is named by no bound pod: no scheduler of that name seems '
        "to serve this cluster",
        "my-gang-scheduler has bound no pod since Watchtower started watching: is it running?",
    )


def test_a_scheduler_name_some_bound_pod_carries_is_served() -> None:
    head = _head(11 * MIN)
    head["spec"]["schedulerName"] = "volcano"
    other = o.pod(name="v", namespace=NS, created=T0 - 3600, gpus=0, cpu="1", node="node-b", phase="Running")
    other["spec"]["schedulerName"] = "volcano"
    [s] = _stuck(_cluster(head, other), last_bound={"volcano": T0 - 60})
    assert s.causes == ("volcano last bound a pod 1m ago: if that is long, is it running?",)


def test_an_incomplete_gang_is_named() -> None:
    job = o.paddle_job_object(
        name="pj", namespace=NS, created=T0 - 11 * MIN, roles={"worker": (4, o.pod_template(gpus=1))}
    )
    pods = [
        o.pod(
            name=f"pj-worker-{i}",
            namespace=NS,
            created=T0 - 11 * MIN,
            gpus=1,
            priority=500_000,
            owner=paddle_owner("pj"),
        )
        for i in range(3)
    ]
    [s] = _stuck(_cluster(job, *pods), last_bound={"": T0 - 60})
    assert s.causes[0] == "gang incomplete: 3 of 4 pods exist"


def test_a_fitting_node_with_a_blocking_taint_is_said_so() -> None:
    taint = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    st = _cluster(_head(11 * MIN, conditions=[o.unschedulable(T0 - 10 * MIN, MSG)]))
    apply(st, o.node("node-b", taints=taint))
    [s] = _stuck(st)
    assert (s.node, s.taints) == ("node-b", ("nvidia.com/gpu=present:NoSchedule",))
    assert "Watchtower does not read tolerations" in s.why


def test_only_the_head_of_each_tier_is_looked_at() -> None:
    second = o.pod(name="later-0", namespace=NS, created=T0 - 10.5 * MIN, gpus=1, priority=500_000)
    st = _cluster(_head(30 * MIN, gpus=5), second)  # the head fits nowhere; the second would
    assert _stuck(st) == ()


def test_a_head_in_an_incomplete_upstream_gang_says_so_as_the_queue_does() -> None:
    """Pods of a 1.36 gang wait in PreEnqueue with no condition: the PodGroup's minCount says why."""
    from tests.unit.domain.test_gangs import gang_pod, load, put

    st = _cluster()
    put(st, load("podgroup-v1alpha2-gang-incomplete"))
    for i in range(3):
        put(st, gang_pod(i, created=T0 - 11 * MIN))
    [s] = _stuck(st, last_bound={"": T0 - 60})
    assert s.status.why == "gang incomplete: 3 of minCount 4 pods exist"
    assert s.causes[0] == "gang incomplete: 3 of minCount 4 pods exist"


def test_a_head_in_an_incomplete_volcano_gang_names_its_min_member() -> None:
    import copy

    from tests.unit.domain.test_gangs import load, put

    group = copy.deepcopy(load("volcano-podgroup-shaped"))
    group["metadata"]["namespace"] = NS
    group["status"].pop("conditions", None)  # Volcano has not written its words yet
    name, need = group["metadata"]["name"], group["spec"]["minMember"]
    st = _cluster()
    put(st, group)
    pod = _head(11 * MIN, gpus=1)
    pod["metadata"].setdefault("annotations", {})["scheduling.k8s.io/group-name"] = name
    put(st, pod)
    [s] = _stuck(st, last_bound={"": T0 - 60})
    assert s.causes[0] == f"gang incomplete: 1 of minMember {need} pods exist"


def test_a_head_nominated_while_its_victims_go_is_not_stuck() -> None:
    # It fits on node-b's free GPUs by the model, but it is the preemptor there: it waits for its victims.
    st = _cluster(_head(30 * MIN, nominated_node="node-b", conditions=[o.unschedulable(T0 - 29 * MIN, MSG)]))
    assert _stuck(st) == ()


def test_room_promised_to_a_nominated_pod_of_a_higher_priority_is_not_free() -> None:
    # node-b's 4 free GPUs are promised to a critical pod nominated there (kube-scheduler counts it as
    # placed when it filters the medium head), so the head fits nowhere.
    promised = o.pod(
        name="debug-0",
        namespace=NS,
        created=T0 - 60,
        gpus=4,
        priority=1_000_000,
        nominated_node="node-b",
        conditions=[o.unschedulable(T0 - 60, MSG)],
    )
    st = _cluster(_head(30 * MIN, conditions=[o.unschedulable(T0 - 29 * MIN, MSG)]), promised)
    assert _stuck(st) == ()  # debug-0 itself waited only a minute
    # Once the promise is gone (debug-0 deleted), node-b's GPUs are free for the head again.
    apply(st, promised, deleted=True)
    assert [s.status.name for s in _stuck(st)] == ["train-0"]
    assert st.node_use.promised == {}


def test_a_gang_is_stuck_only_when_all_its_queued_pods_fit_together() -> None:
    # Two 4-GPU pods of a PaddleJob: node-b has room for one of them, node-a has no CPU for either.
    pods = [
        o.pod(
            name=f"ocr-worker-{i}",
            namespace=NS,
            created=T0 - 30 * MIN,
            gpus=4,
            cpu="8",
            priority=500_000,
            owner=paddle_owner("ocr"),
            conditions=[o.unschedulable(T0 - 29 * MIN, MSG)],
        )
        for i in range(2)
    ]
    assert _stuck(_cluster(*pods)) == ()
    # With node-a's CPU back, one pod goes on each node: the gang fits, and it has waited 30 minutes.
    roomy = state_of(o.node("node-a"), o.node("node-b"), *pods)
    [s] = _stuck(roomy)
    assert (s.status.kind, s.status.name) == ("PaddleJob", "ocr")
