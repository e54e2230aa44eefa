"""The service's tick, kept by difference from one tick to the next, says what a tick from scratch says.

A QueueTracker keeps what unchanged facts give (the queue order, positions, gauges, the stuck index, the
priority-inversion candidates) and after churn updates it from the changed workloads only. Through
random churn of pods, PodGroups, PaddleJobs, nodes, Kueue Workloads and queues, DRA claims and
ResourceSlices, its Tick, its gauges and the queue JSON must equal those of a fresh QueueTracker that is handed
the same objects at once. The objects go straight into each QueueTracker's state as domain records (what the
Ingestor would make of them), so both see the same cluster whatever the order of the changes.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from typing import Any

import pytest
from msgspec.structs import replace

from watchtower.bootstrap import object_decoder
from watchtower.config.model import Settings
from watchtower.domain.forms.dra.records import (
    ALL,
    AllocatedDevice,
    DeviceRequest,
    PodClaim,
    ResourceClaim,
    ResourceSlice,
    SliceDevice,
    class_from_selectors,
)
from watchtower.domain.forms.gangs.records import REF_PODGROUP, Gang, GroupRef
from watchtower.domain.forms.kueue.records import (
    ClusterQueue,
    KueuePreempted,
    KueueWorkload,
    LocalQueue,
    WorkloadPriorityClass,
)
from watchtower.domain.health import HEALTHY
from watchtower.domain.queue import Fragmentation, QueueEvaluator, WorkloadState
from watchtower.domain.records import Condition, Controller, Node, OwnerRef, Pod
from watchtower.domain.state import ClusterState
from watchtower.domain.tick import Tick
from watchtower.domain.tiers import TierPolicy
from watchtower.ports import QueueGauges
from watchtower.services.queue_json import snapshot_dict
from watchtower.services.queue_tracker import QueueTracker
from watchtower.services.wait_reasons import main_reason

T0 = 1_800_000_000.0
PRIOS = [(1_000_000, "urgent-debug"), (900_000, "online-serving"), (500_000, "experiment"), (0, "")]
STUCK = (
    "0/6 nodes are available: 6 Insufficient nvidia.com/gpu. preemption: 0/6 nodes are available: "
    "6 Preemption is not helpful for scheduling."
)
MESSAGES = [
    STUCK,
    STUCK.replace("0/6", "0/7"),
    "0/6 nodes are available: 2 Insufficient cpu, 4 Insufficient nvidia.com/gpu. preemption: 0/6 nodes are "
    "available: 6 No preemption victims found for incoming pod.",
    "0/6 nodes are available: 6 cannot allocate all claims. still not schedulable, preemption: 0/6 nodes "
    "are available: 6 Preemption is not helpful for scheduling.",
]
GPU_CLASS = class_from_selectors("gpu.nvidia.com", ["device.driver == 'gpu.nvidia.com'"])
NAMESPACES = ["vision", "speech"]
NODES = [f"n{i}" for i in range(4)]
DRA_NODES = ["d0", "d1"]


class RecordedMetrics:
    """The QueueTracker's metrics port keeping the last gauges: what /metrics would show after the tick."""

    def __init__(self) -> None:
        self.gauges: QueueGauges | None = None

    def evaluated(self, gauges: QueueGauges, duration: float) -> None:
        self.gauges = gauges

    def __getattr__(self, name: str) -> Any:  # the counters a tick does not touch here
        return lambda *a, **k: None


class Clock:
    def __init__(self) -> None:
        self.at = T0

    def now(self) -> float:
        return self.at


def new_tracker(clock: Clock) -> QueueTracker:
    settings = Settings()
    return QueueTracker(
        settings=settings,
        clock=clock,
        metrics=RecordedMetrics(),
        decoder=object_decoder(settings),  # unused: the records go into the state directly
        source_health=lambda: HEALTHY,
    )


class World:
    """The cluster's current objects, by kind, applied to the live state as they change."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.nodes: dict[str, Node] = {}
        self.slices: dict[str, ResourceSlice] = {}
        self.claims: dict[tuple[str, str], ResourceClaim] = {}
        self.queues: dict[str, ClusterQueue] = {}
        self.local_queues: dict[tuple[str, str], LocalQueue] = {}
        self.kueue: dict[tuple[str, str], KueueWorkload] = {}
        self.jobs: dict[str, Controller] = {}
        self.groups: dict[tuple[str, str], Gang] = {}
        self.pods: dict[str, Pod] = {}
        self.n = 0

    # ---- loading -------------------------------------------------------------------------------------

    def load(self, st: ClusterState) -> None:
        """Hand every current object to a state, in the order the service lists its kinds."""
        for n in self.nodes.values():
            st.upsert_node(n)
        for c in self.jobs.values():
            st.control.upsert_controller(c)
        for g in self.groups.values():
            st.forms.gangs.upsert_pod_group(g)
        for pc in (WorkloadPriorityClass("kueue-urgent", 1_000_000), WorkloadPriorityClass("kueue-low", 100)):
            st.forms.kueue.upsert_priority_class(pc)
        for q in self.queues.values():
            st.forms.kueue.upsert_cluster_queue(q)
        for lq in self.local_queues.values():
            st.forms.kueue.upsert_local_queue(lq)
        for w in self.kueue.values():
            st.forms.kueue.upsert_workload(w)
        st.forms.dra.upsert_class(GPU_CLASS)
        for s in self.slices.values():
            st.forms.dra.upsert_slice(s)
        for c in self.claims.values():
            st.forms.dra.upsert_claim(c)
        for p in self.pods.values():
            st.upsert_pod(p)

    def build(self) -> None:
        rnd = self.rnd
        for name in NODES:
            self.nodes[name] = Node(name, gpus=8, cpu_millis=64_000, memory_bytes=512 << 30, pods=110)
        for name in DRA_NODES:
            self.nodes[name] = Node(name, cpu_millis=64_000, memory_bytes=512 << 30, pods=110)
            self.slices[name] = self._slice(name, 1, 4)
        for i in range(4):
            self.queues[f"cq-{i}"] = ClusterQueue(f"cq-{i}", f"cohort-{i % 2}", 16, None, None, 8, 8, 0, 0, 0)
        for ns in NAMESPACES:
            self.local_queues[(ns, "main")] = LocalQueue(ns, "main", "cq-0")
        for i in range(6):
            self.kueue_workload(i)
        for i in range(8):
            self.paddle_job(i)
        for i in range(3):
            self.pod_group(i)
        for _ in range(4):
            self.add_pod("group")
        for _ in range(30):
            self.add_pod(rnd.choice(["bare", "job", "paddle", "group", "kueue", "dra"]))

    def _slice(self, node: str, generation: int, devices: int) -> ResourceSlice:
        return ResourceSlice(
            f"{node}-gpu",
            "gpu.nvidia.com",
            node,
            generation,
            node,
            tuple(SliceDevice(f"gpu-{d}") for d in range(devices)),
        )

    def kueue_workload(self, i: int, st: ClusterState | None = None) -> None:
        rnd, ns = self.rnd, NAMESPACES[i % 2]
        admitted = rnd.random() < 0.3
        cls = rnd.choice(["kueue-urgent", "kueue-low"])
        w = KueueWorkload(
            ns,
            f"job-kjob-{i}",
            f"kwl-{i}",
            T0 - rnd.uniform(600, 7200),
            OwnerRef("Job", f"kjob-{i}", "batch/v1", f"kjob-uid-{i}"),
            "main",
            "cq-0" if admitted else "",
            1_000_000 if cls == "kueue-urgent" else 100,
            cls,
            "WorkloadPriorityClass",
            "",
            None,
            2,
            rnd.choice([2, 8, 16]),
            rnd.choice([1, 4, 8]),
            reserved=admitted,
            admitted=admitted,
            admitted_at=T0 - 300 if admitted else None,
            reason="QuotaReserved" if admitted else "Pending",
            message="Quota reserved"
            if admitted
            else "couldn't assign flavors to pod set main: insufficient quota",
            # A requeued one keeps its record for good: it is never deleted below.
            preempted=KueuePreempted("InClusterQueue", T0 - 500, "", "/cohort-0/cq-0") if i == 0 else None,
            evicted_reason="Preempted" if i == 0 else "",
        )
        self.kueue[(ns, w.name)] = w
        if st is not None:
            st.forms.kueue.upsert_workload(w)

    def paddle_job(self, i: int, st: ClusterState | None = None) -> None:
        rnd = self.rnd
        prio = rnd.choice(PRIOS)
        size = rnd.choice([2, 4])
        c = Controller(
            NAMESPACES[i % 2],
            "PaddleJob",
            f"pdj-{i}",
            f"pdj-uid-{i}",
            priority_class=prio[1],
            gpus_per_pod=4,
            gpus=4 * size,
            pods=size,
            created=T0 - rnd.uniform(600, 7200),
            phase=rnd.choice(["Pending", "Starting", "Running"]),
            pods_reported=rnd.randrange(size + 1),
        )
        self.jobs[c.name] = c
        if st is not None:
            st.control.upsert_controller(c)

    def pod_group(self, i: int, st: ClusterState | None = None) -> None:
        rnd = self.rnd
        msg = rnd.choice(["", *MESSAGES])
        g = Gang(
            NAMESPACES[i % 2],
            f"pg-{i}",
            f"pg-uid-{i}",
            T0 - rnd.uniform(600, 7200),
            rnd.choice([2, 3]),
            False,
            "Unschedulable" if msg else "",
            msg,
        )
        self.groups[(g.namespace, g.name)] = g
        if st is not None:
            st.forms.gangs.upsert_pod_group(g)

    def add_pod(self, shape: str, st: ClusterState | None = None) -> None:
        rnd = self.rnd
        self.n += 1
        i = self.n
        ns = rnd.choice(NAMESPACES)
        prio = rnd.choice(PRIOS)
        owner: OwnerRef | None = None
        group: GroupRef | None = None
        claims: tuple[PodClaim, ...] = ()
        gpus = rnd.choice([1, 4, 8])
        name = f"pod-{i}"
        if shape == "job":
            j = rnd.randrange(5)
            owner = OwnerRef("Job", f"job-{j}", "batch/v1", f"job-uid-{j}")
        elif shape == "paddle" and self.jobs:
            job = self.jobs[rnd.choice(sorted(self.jobs))]
            ns, owner, gpus = (
                job.namespace,
                OwnerRef("PaddleJob", job.name, "batch.paddlepaddle.org/v1", job.uid),
                4,
            )
            prio = next((p for p in PRIOS if p[1] == job.priority_class), prio)
        elif shape == "group" and self.groups:
            g = self.groups[rnd.choice(sorted(self.groups))]
            ns, group, gpus = g.namespace, GroupRef(REF_PODGROUP, g.name), 8
        elif shape == "kueue" and self.kueue:
            w = self.kueue[rnd.choice(sorted(self.kueue))]
            assert w.owner is not None
            ns, owner, prio = w.namespace, w.owner, (w.priority or 0, "")
        elif shape == "dra":
            want = rnd.choice([1, 2, ALL])
            cname = f"claim-{i}"
            # Some pods name a claim that is not there yet: held before the queue.
            if rnd.random() < 0.8:
                claim = ResourceClaim(ns, cname, (DeviceRequest("gpus", "gpu.nvidia.com", want),))
                self.claims[(ns, cname)] = claim
                if st is not None:
                    st.forms.dra.upsert_claim(claim)
            claims, gpus = (PodClaim("gpus", cname),), 0
        bound = rnd.random() < 0.3 and shape != "dra"
        p = Pod(
            uid=f"u{i}",
            namespace=ns,
            name=name,
            created=T0 - rnd.uniform(60, 7200),
            phase="Running" if bound else "Pending",
            priority=prio[0],
            priority_class=prio[1],
            gpus=gpus,
            cpu_millis=1000,
            memory_bytes=1 << 30,
            node=rnd.choice(NODES) if bound else "",
            nominated_node=rnd.choice(["", "", NODES[0]]) if not bound else "",
            owner=owner,
            group=group,
            claims=claims,
            scheduling_gated=not bound and rnd.random() < 0.05,
            scheduled=Condition("True", since=T0 - 30)
            if bound
            else (
                Condition("False", "Unschedulable", rnd.choice(MESSAGES), T0 - 50)
                if rnd.random() < 0.8
                else None
            ),
        )
        self.pods[p.uid] = p
        if st is not None:
            st.upsert_pod(p)

    # ---- churn ---------------------------------------------------------------------------------------

    def churn(self, st: ClusterState) -> None:
        """Apply one random change to the live state (and to the objects a fresh state gets)."""
        rnd = self.rnd
        r = rnd.random()
        waiting = sorted(u for u, p in self.pods.items() if p.waiting)
        if r < 0.25 and waiting:  # a new scheduler message
            p = self.pods[rnd.choice(waiting)]
            since = p.scheduled.since if p.scheduled is not None else T0 - 40
            self._put_pod(
                st, replace(p, scheduled=Condition("False", "Unschedulable", rnd.choice(MESSAGES), since))
            )
        elif r < 0.33 and waiting:  # bound, and running
            p = self.pods[rnd.choice(waiting)]
            node = rnd.choice(DRA_NODES if p.claims else NODES)
            self._put_pod(st, replace(p, node=node, phase="Running", scheduled=Condition("True", since=T0)))
            for pc in p.claims:
                c = self.claims.get((p.namespace, pc.claim))
                if c is not None and not c.allocated:
                    devs = (AllocatedDevice("gpus", "gpu.nvidia.com", node, "gpu-0"),)
                    self._put_claim(st, replace(c, allocated=True, devices=devs))
        elif r < 0.38 and self.pods:  # finished
            uid = rnd.choice(sorted(self.pods))
            self._put_pod(st, replace(self.pods[uid], phase="Succeeded"))
        elif r < 0.44 and self.pods:  # gone
            uid = rnd.choice(sorted(self.pods))
            del self.pods[uid]
            st.delete_pod(uid)
        elif r < 0.52:
            self.add_pod(rnd.choice(["bare", "job", "paddle", "group", "kueue", "dra"]), st)
        elif r < 0.56 and waiting:  # nominated for preemption
            p = self.pods[rnd.choice(waiting)]
            self._put_pod(st, replace(p, nominated_node=rnd.choice(["", NODES[1]])))
        elif r < 0.62 and self.groups:
            g = self.groups[rnd.choice(sorted(self.groups))]
            msg = rnd.choice(["", *MESSAGES])
            g = replace(
                g, message=msg, reason="Unschedulable" if msg else "", min_count=rnd.choice([2, 3, 5])
            )
            self.groups[(g.namespace, g.name)] = g
            st.forms.gangs.upsert_pod_group(g)
        elif r < 0.68 and self.jobs:
            c = self.jobs[rnd.choice(sorted(self.jobs))]
            c = replace(
                c,
                pods_reported=rnd.randrange(c.pods + 1),
                phase=rnd.choice(["Pending", "Starting", "Running"]),
            )
            self.jobs[c.name] = c
            st.control.upsert_controller(c)
        elif r < 0.76 and self.kueue:  # admitted, evicted back, or a new Kueue message
            w = self.kueue[rnd.choice(sorted(self.kueue))]
            admit = rnd.random() < 0.5
            w = replace(
                w,
                reserved=admit,
                admitted=admit,
                admitted_at=T0 - 100 if admit else None,
                cluster_queue=rnd.choice(["cq-0", "cq-1"]) if admit else "",
                reason="QuotaReserved" if admit else "Pending",
                message=rnd.choice(["insufficient quota", "couldn't assign flavors", "Quota reserved"]),
            )
            self.kueue[(w.namespace, w.name)] = w
            st.forms.kueue.upsert_workload(w)
        elif r < 0.79 and self.kueue:  # a Kueue Workload gone (never the requeued one: its record stays)
            key = rnd.choice(sorted(self.kueue))
            if self.kueue[key].preempted is None:
                st.forms.kueue.delete_workload(self.kueue.pop(key))
        elif r < 0.82:
            self.kueue_workload(len(self.kueue) + 10 + self.n, st)
        elif r < 0.87:  # a ClusterQueue's reserved quota moves: free quota for the held ones, or none
            q = self.queues[rnd.choice(sorted(self.queues))]
            q = replace(q, reserved_gpus=rnd.choice([0, 8, 16]))
            self.queues[q.name] = q
            st.forms.kueue.upsert_cluster_queue(q)
        elif r < 0.89:
            lq = self.local_queues[(rnd.choice(NAMESPACES), "main")]
            lq = replace(lq, cluster_queue=rnd.choice(["cq-0", "cq-2", "cq-9"]))
            self.local_queues[(lq.namespace, lq.name)] = lq
            st.forms.kueue.upsert_local_queue(lq)
        elif r < 0.93:  # the driver republishes a slice, maybe with another device count
            name = rnd.choice(DRA_NODES)
            s = self.slices.get(name)
            if s is not None and rnd.random() < 0.3:  # the driver withdraws the node's slice
                del self.slices[name]
                st.forms.dra.delete_slice(s)
            else:
                generation = s.generation + 1 if s is not None else 1
                self.slices[name] = s = self._slice(name, generation, rnd.choice([4, 8]))
                st.forms.dra.upsert_slice(s)
        elif r < 0.96 and self.claims:
            key = rnd.choice(sorted(self.claims))
            c = self.claims[key]
            self._put_claim(st, replace(c, deleting=not c.deleting))
        else:  # a node cordoned or uncordoned, or its GPUs changed: capacity and fragmentation move
            n = self.nodes[rnd.choice(NODES)]
            n = dataclasses.replace(n, unschedulable=rnd.random() < 0.3, gpus=rnd.choice([4, 8, 16]))
            self.nodes[n.name] = n
            st.upsert_node(n)

    def _put_pod(self, st: ClusterState, p: Pod) -> None:
        self.pods[p.uid] = p
        st.upsert_pod(p)

    def _put_claim(self, st: ClusterState, c: ResourceClaim) -> None:
        self.claims[(c.namespace, c.name)] = c
        st.forms.dra.upsert_claim(c)


def picture(w: QueueTracker, now: float) -> tuple[Tick, QueueGauges | None, dict[str, Any]]:
    """Return what one tick shows: the Tick (holders sorted: they come in no order), its gauges, its JSON."""
    tick = w.evaluate(now)
    metrics = w.metrics
    assert isinstance(metrics, RecordedMetrics)
    doc = snapshot_dict(tick.snapshot, w.policy.tiers, w.state, waits=tick.waits, stuck=tick.stuck)
    holders = tuple(sorted(tick.holders, key=lambda h: (h.workload, h.node)))
    return dataclasses.replace(tick, holders=holders), metrics.gauges, doc


def assert_by_definition(tick: Tick, gauges: QueueGauges | None, tiers: TierPolicy) -> None:
    """Check a tick's positions, fragmentation and gauges against their definitions (both QueueTrackers share
    the code that keeps them: equal pictures alone would not catch a wrong formula)."""
    snap = tick.snapshot
    # Ahead of a workload: the work before it whose pods wait in the scheduler's queue (not Kueue-held, not
    # yet without pods).
    queued = [w for w in snap.workloads if w.facts.scheduler_queued]
    # Fragmented: pending or partial work whose pods fit the free GPUs in all but not on one node.
    waiting_or_partial = [
        w for w in snap.workloads if w.state in (WorkloadState.PENDING, WorkloadState.PARTIAL)
    ]
    for w in snap.workloads:
        before = queued[: queued.index(w)] if w in queued else None
        assert w.ahead == (len(before) if before is not None else 0)
        higher = [q for q in before or () if tiers.rank(q.tier) < tiers.rank(w.tier)]
        assert w.ahead_higher_tier == len(higher)
    cap = snap.capacity
    assert snap.fragmentation == tuple(
        Fragmentation(w.key, w.gpus_per_pod, cap.free_total, cap.largest_free)
        for w in sorted(waiting_or_partial, key=lambda w: w.key)
        if cap.largest_free < w.gpus_per_pod <= cap.free_total
    )
    assert snap.gated_pods == sum(w.pods_gated for w in snap.workloads)
    assert gauges is not None
    waiting = [w for w in snap.workloads if w.waiting]
    assert gauges.pending == Counter((w.tier, w.namespace, main_reason(w)) for w in waiting)
    for t in tiers.tiers:
        mine = [w for w in waiting if w.tier == t.name]
        assert gauges.oldest_wait[t.name] == max((w.wait_seconds for w in mine), default=0.0)
        gangs = [w for w in mine if w.state is WorkloadState.PARTIAL and w.gang]
        assert gauges.partial_gangs[t.name] == len(gangs)
        assert gauges.partial_gang_gpus[t.name] == sum(w.gpus_held for w in gangs)


@pytest.mark.parametrize("seed", range(10))
def test_a_tick_after_random_churn_equals_a_tick_from_scratch(seed: int) -> None:
    rnd = random.Random(seed)
    clock = Clock()
    world = World(rnd)
    world.build()
    live = new_tracker(clock)
    world.load(live.state)
    evaluator = QueueEvaluator(live.policy)  # the evaluator alone, kept across ticks as the bench keeps it
    now = T0
    seen = set()
    for step in range(40):
        for _ in range(rnd.choice([1, 1, 2, 5])):
            world.churn(live.state)
        now += rnd.choice([0.0, 15.0, 600.0])
        clock.at = now
        got = picture(live, now)
        fresh = new_tracker(clock)
        world.load(fresh.state)
        want = picture(fresh, now)
        assert_by_definition(*want[:2], live.policy.tiers)
        assert got[0] == want[0], f"step {step}: the Tick"
        assert got[1] == want[1], f"step {step}: the gauges"
        assert got[2] == want[2], f"step {step}: the queue JSON"
        assert evaluator.evaluate(live.state, now=now) == want[0].snapshot, f"step {step}: the evaluator"
        # The next tick with nothing changed but the clock agrees too.
        later = picture(live, now + 7)
        assert later[2] == picture(fresh, now + 7)[2], f"step {step}: the unchanged tick"
        seen.update(w.source for w in got[0].snapshot.workloads)
        seen.update("stuck" for _ in got[0].stuck)
        seen.update("holders" for _ in got[0].holders)
        seen.update("fragmented" for _ in got[0].snapshot.fragmentation)
        seen.update("dra" for w in got[0].snapshot.workloads if w.facts.gpu_claims)
    # The churn reached every kind of wait (a run that missed some would prove less than it says).
    assert {"pods", "kueue", "podgroup", "paddlejob", "dra", "stuck", "holders"} <= seen, seen


@pytest.mark.parametrize("lag", [0, 10**9])
def test_the_change_log_keeps_only_what_a_reader_still_needs(
    lag: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log of changes the tick reads by difference used to keep every entry until 500,000 (17 minutes
    of a 500 events/s feed: the soak's steady RSS climb). After each tick it keeps only what the holder
    index, read only while urgent work is stuck, has not read yet, and nothing once that index is more than
    HOLDER_LAG behind, which then starts over; the Tick still equals one from scratch either way."""
    from watchtower.services import queue_tracker

    monkeypatch.setattr(queue_tracker, "HOLDER_LAG", lag)
    rnd = random.Random(7)
    clock = Clock()
    world = World(rnd)
    world.build()
    live = new_tracker(clock)
    world.load(live.state)
    now = T0
    touched = 0
    for step in range(40):
        before = live.state.log.changes_end
        for _ in range(rnd.choice([1, 2, 5])):
            world.churn(live.state)
        touched += live.state.log.changes_end - before
        now += rnd.choice([15.0, 600.0])
        clock.at = now
        got = picture(live, now)
        fresh = new_tracker(clock)
        world.load(fresh.state)
        assert got[0] == picture(fresh, now)[0], f"step {step}: the Tick"
        st = live.state
        if lag == 0:
            assert st.log.changes == [], f"step {step}: {len(st.log.changes)} entries kept"
        else:  # kept from where the holder index last read, not from the start
            assert st.log.changes_base == live._holders.needs(st) or st.log.changes == []
    assert touched > 50  # what the log would hold without forgetting
    assert len(live.state.log.changes) < touched
