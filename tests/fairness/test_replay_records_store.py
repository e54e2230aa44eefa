"""The replay records on each store (SQLite and a real PostgreSQL, `store_backend`): rows written by two
replicas at different ticks merge to one (the earliest start and end, the latest preemption and sighting),
an ended workload keeps its outcome against a replica a tick behind, the week reads back as trace jobs and
nodes through the port `ReplayRecords`, and pruning keeps what is open."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tests.fairness.history_stores import open_history
from tests.fixtures.stores import StoreBackend
from watchtower.domain.replay_record import NodeRecord, WorkloadRecord
from watchtower.ports import ReplayRecords, ReplayRecordStore
from watchtower.replay.policy import NodeSpec

H = 3600.0


def wl(name: str, arrived: float, **kw: Any) -> WorkloadRecord:
    base = WorkloadRecord(
        key=f"nlp/Job/{name}@{arrived:.0f}",
        namespace="nlp",
        kind="Job",
        name=name,
        team="language",
        tier="high",
        priority=100_000,
        form="kueue",
        pods=4,
        gpus_per_pod=8,
        cpu_millis_per_pod=16_000,
        memory_bytes_per_pod=64 * 2**30,
        gang_min=4,
        arrived=arrived,
    )
    return replace(base, **kw)


def stores(backend: StoreBackend) -> tuple[Any, Any]:
    """Two histories on one database (two replicas), each the recorder's store and the replay's port."""
    a: Any = open_history(backend)
    b: Any = open_history(backend)
    ports: tuple[ReplayRecords, ReplayRecordStore] = (a, a)
    assert all(callable(getattr(a, m)) for m in ("replay_jobs", "replay_nodes", "record_replay")), ports
    return a, b


def test_two_replicas_writing_at_different_ticks_leave_one_merged_row(store_backend: StoreBackend) -> None:
    a, behind = stores(store_backend)
    a.record_replay([wl("x", 0.0)])
    a.record_replay([wl("x", 0.0, started=10.0, outcome="running")])
    behind.record_replay([wl("x", 0.0, started=12.0, outcome="running", preempted=50.0)])
    a.record_replay([wl("x", 0.0, started=10.0, preempted=40.0, ended=2 * H, outcome="finished")])
    behind.record_replay([wl("x", 0.0, started=12.0, preempted=50.0, outcome="running")])  # a tick behind
    behind.record_replay([wl("x", 0.0, started=12.0, preempted=50.0, ended=2 * H + 30, outcome="finished")])
    (got,) = a.replay_workloads(0.0, 10 * H)
    assert (got.started, got.preempted, got.ended, got.outcome) == (10.0, 50.0, 2 * H, "finished")
    assert got == wl("x", 0.0, started=10.0, preempted=50.0, ended=2 * H, outcome="finished")
    assert a.replay_open() == ([], [])
    a.close()
    behind.close()


def test_the_week_reads_back_as_trace_jobs_and_nodes(store_backend: StoreBackend) -> None:
    h, _ = stores(store_backend)
    h.record_replay(
        [
            wl("done", 1 * H, started=2 * H, ended=5 * H, outcome="finished"),
            wl("running", 3 * H, started=4 * H, outcome="running"),
            wl("waiting", 6 * H),
            wl("withdrawn", 6 * H, ended=7 * H, outcome="deleted"),
            wl("next-week", 200 * H),
        ],
        [
            NodeRecord("gpu-1", 8, 96_000, 768 * 2**30, 0.0, 8 * H),
            NodeRecord("gpu-2", 8, 0, 0, 0.0, 0.5 * H),
            NodeRecord("later", 4, 0, 0, 300 * H, 301 * H),
        ],
    )
    jobs = h.replay_jobs(0.0, 168 * H)
    by_id = {j.id.split("@")[0]: j for j in jobs}
    assert list(by_id) == ["nlp/Job/done", "nlp/Job/running", "nlp/Job/waiting"]  # by arrival
    done, running, waiting = by_id.values()
    assert (done.submitted, done.started, done.duration) == (1 * H, 2 * H, 3 * H)
    assert (done.tier, done.priority, done.pods, done.gpus_per_pod, done.gang_min) == (
        "high",
        100_000,
        4,
        8,
        4,
    )
    assert running.duration == 301 * H - 4 * H  # still running: up to the last the recorder wrote
    assert (waiting.started, waiting.duration) == (None, 3 * H)  # its tier's median run time
    assert list(h.replay_nodes(0.0, 168 * H)) == [
        NodeSpec(name="gpu-1", gpus=8, cpu=96.0, memory_gib=768.0),
        NodeSpec(name="gpu-2", gpus=8),
    ]
    h.close()


def test_nodes_merge_and_pruning_keeps_what_is_open(store_backend: StoreBackend) -> None:
    a, b = stores(store_backend)
    a.record_replay(nodes=[NodeRecord("gpu-1", 8, 0, 0, 100.0, 200.0)])
    b.record_replay(nodes=[NodeRecord("gpu-1", 4, 0, 0, 90.0, 150.0)])
    assert a.replay_node_rows(0.0, 1e9) == [NodeRecord("gpu-1", 8, 0, 0, 90.0, 200.0)]
    a.record_replay([wl("old", 0.0, ended=10.0, outcome="deleted"), wl("open", 0.0)])
    assert a.prune_replay(before=1000.0) == 1 + 1  # the old workload, the node last seen before
    assert [w.name for w in a.replay_workloads(0.0, 1e9)] == ["open"]
    a.close()
    b.close()
