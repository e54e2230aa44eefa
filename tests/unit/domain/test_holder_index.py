"""The tick's GPU holders and running counts follow the state's change log; each must always say what a walk
of every pod says, through binds, finishes, deletes, re-list replays and pods re-keyed to their TrainJob."""

from __future__ import annotations

from collections import Counter

from tests.unit.domain.helpers import NS, POLICY, T0, TIERS, apply, pod
from watchtower.domain.alerts.holders import HolderIndex, gpu_holders
from watchtower.domain.running import RunningTiers
from watchtower.domain.state import ClusterState
from watchtower.domain.workloads import WorkloadKey
from watchtower.simulator import objects as o
from watchtower.simulator.forms.jobset import objects as js_o

OWNER = o.owner_ref("PaddleJob", "train", api_version="batch.paddlepaddle.org/v1", uid="pj-1")


def worker(i: int, *, node: str | None = "gpu-1", phase: str = "Running", gpus: int = 4, prio: int = 100_000):
    return o.pod(
        name=f"train-worker-{i}",
        namespace=NS,
        uid=f"w-{i}",
        created=T0,
        gpus=gpus,
        priority=prio,
        owner=OWNER,
        node=node,
        phase=phase,
        conditions=[o.scheduled(T0 + 5)] if node else None,
    )


def walked(state: ClusterState, below: int = -1) -> list:
    return [h for h in gpu_holders(state, TIERS) if TIERS.rank(h.tier) > below]


def indexed(index: HolderIndex, state: ClusterState, below: int = -1) -> list:
    return sorted(index.below(state, below), key=lambda h: (h.workload, h.node))


def running_walk(state: ClusterState) -> Counter:
    """What the tick counted before: one bound, unfinished training pod's tier per workload."""
    out: Counter = Counter()
    for members in state.by_workload.values():
        for uid in members:
            p = state.pods[uid]
            if p.holds_resources and POLICY.selector.matches(p):
                out[TIERS.tier_of(p.priority, p.priority_class).name] += 1
                break
    return out


def check(index: HolderIndex, running: RunningTiers, state: ClusterState) -> None:
    for below in (-1, 0, 2):
        assert indexed(index, state, below) == walked(state, below)
    counts = running.by_tier(state, ())
    assert {t: n for t, n in counts.items() if n} == dict(running_walk(state))


def test_the_index_says_what_the_walk_says_through_bind_finish_delete_and_replays():
    state = ClusterState()
    index, running = HolderIndex(TIERS), RunningTiers(TIERS, POLICY.selector)
    apply(state, o.node("gpu-1"))
    apply(state, o.node("gpu-2"))
    apply(state, worker(0, node=None))
    apply(state, worker(1, node=None))
    check(index, running, state)
    assert index.below(state, -1) == ()

    apply(state, worker(0))  # bound on gpu-1
    apply(state, worker(1, node="gpu-2", prio=1_000_000))  # bound elsewhere, in the top tier
    check(index, running, state)
    key = WorkloadKey(NS, "PaddleJob", "train")
    assert [(h.node, h.gpus, h.tier) for h in indexed(index, state)] == [
        ("gpu-1", 4, "low"),
        ("gpu-2", 4, "critical"),
    ]
    assert [h.node for h in index.below(state, 0)] == ["gpu-1"]  # only what ranks below the top tier

    apply(state, worker(2, prio=1_000_000))  # a top-tier pod joins on gpu-1: the node's holder is it now
    check(index, running, state)
    (on_1,) = (h for h in index.below(state, -1) if h.node == "gpu-1")
    assert (on_1.workload, on_1.gpus, on_1.tier) == (key, 8, "critical")

    apply(state, worker(2, phase="Succeeded"))  # the top pod finishes: the one left holds the node
    check(index, running, state)
    apply(state, worker(0), deleted=True)
    check(index, running, state)

    # A re-list replays every object as it is: nothing changes, and the same tuple comes back.
    before = index.below(state, -1)
    for p in (worker(1, node="gpu-2", prio=1_000_000), worker(2, phase="Succeeded")):
        apply(state, p)
    assert index.below(state, -1) is before
    check(index, running, state)

    apply(state, worker(1, node="gpu-2", prio=1_000_000), deleted=True)
    check(index, running, state)
    assert index.below(state, -1) == ()


def test_a_waiting_pods_new_message_leaves_the_holders_tuple_as_it_was():
    state = ClusterState()
    index = HolderIndex(TIERS)
    apply(state, o.node("gpu-1"))
    apply(state, worker(0))
    waiting = o.pod(name="queued", namespace=NS, uid="q-1", created=T0, gpus=8)
    apply(state, waiting)
    before = index.below(state, -1)
    waiting["status"]["conditions"] = [
        o.unschedulable(T0 + 9, "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    ]
    apply(state, waiting)
    assert index.below(state, -1) is before


def test_bound_pods_re_keyed_to_their_train_job_move_in_the_index():
    """A TrainJob's JobSet seen after its pods were bound: the pods become the TrainJob's (DESIGN §3.17)."""
    state = ClusterState()
    index, running = HolderIndex(TIERS), RunningTiers(TIERS, POLICY.selector)
    apply(state, o.node("gpu-1"))
    tpl = o.pod_template(gpus=8, priority_class="batch")
    js = js_o.jobset(
        name="llama-ft", namespace=NS, created=T0, replicated_jobs={"workers": (1, 2, tpl)}, train_job=True
    )
    jobs = js_o.child_jobs(js)
    for j in jobs:
        apply(state, j)
        for p in js_o.child_pods(j, created=T0 + 5, gpus=8, node="gpu-1", phase="Running"):
            apply(state, p)
    check(index, running, state)
    assert {h.workload.kind for h in index.below(state, -1)} == {"JobSet"}
    apply(state, js)
    check(index, running, state)
    assert {h.workload for h in index.below(state, -1)} == {WorkloadKey(NS, "TrainJob", "llama-ft")}


def test_a_priority_class_change_starts_the_index_over():
    state = ClusterState()
    index, running = HolderIndex(TIERS), RunningTiers(TIERS, POLICY.selector)
    apply(state, o.node("gpu-1"))
    apply(state, worker(0))
    check(index, running, state)
    apply(state, o.priority_class("batch", value=100_000))
    check(index, running, state)


def test_running_counts_leave_out_the_listed_workloads():
    state = ClusterState()
    running = RunningTiers(TIERS, POLICY.selector)
    apply(state, o.node("gpu-1"))
    apply(state, worker(0))
    apply(state, worker(1, node=None))  # partly placed: the queue lists it
    key = WorkloadKey(NS, "PaddleJob", "train")
    assert running.by_tier(state, ())["low"] == 1
    assert running.by_tier(state, [key]) == {"critical": 0, "high": 0, "medium": 0, "low": 0}
    assert pod(worker(0)).node == "gpu-1"


def test_the_changes_it_hands_on_turn_its_last_answer_into_the_next():
    """The priority-inversion rule's index applies `changes` to the holders it kept instead of comparing
    every holder: the last answer with each changed workload's records replaced must be the new answer,
    and when the tiers asked for change there are no changes to apply (None)."""
    state = ClusterState()
    index = HolderIndex(TIERS)
    apply(state, o.node("gpu-1"))
    apply(state, o.node("gpu-2"))
    before = index.below(state, -1)
    steps = [
        worker(0),
        worker(1, node="gpu-2", prio=1_000_000),
        worker(2),
        worker(2, phase="Succeeded"),
        worker(3, node="gpu-2"),
    ]
    for p in steps:
        apply(state, p)
        now = index.below(state, -1)
        ch = index.changes
        assert ch is not None and ch.upto == ch.since + 1
        kept = [h for h in before if h.workload not in ch.records]
        kept += [h for records in ch.records.values() for h in records]
        assert sorted(kept, key=lambda h: (h.workload, h.node)) == indexed(index, state)
        assert sorted(now, key=lambda h: (h.workload, h.node)) == walked(state)
        before = now
    index.below(state, 0)  # other tiers asked for: the answer is not the last one moved
    assert index.changes is None
    index.below(state, 0)
    assert index.changes is not None and index.changes.records == {}
