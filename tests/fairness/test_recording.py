"""Recording the fairness history from the service's ticks: what each tick adds, and that recording the same
ticks again, or restarting (a new process that lists the cluster again) in the middle, leaves the same rows.

Real parts: the queue tracker on a replayed cluster (tests/fixtures/scenario.py), the composition root's
recorder, the history on SQLite (and, for recording again and restarting, on a real PostgreSQL too).
"""

from __future__ import annotations

import copy
import sqlite3
from pathlib import Path
from typing import Any

import orjson

from tests.fairness.history_stores import everything, open_history
from tests.fixtures.scenario import NOW, Cluster, ManualClock, ReplaySource, demo_cluster, list_everything
from tests.fixtures.stores import StoreBackend
from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.bootstrap import build_container, fairness_recorder
from watchtower.config import Settings
from watchtower.runtime.tick_loop import TickLoop
from watchtower.services.leadership import SoleLeader
from watchtower.simulator import objects as o


def _pod(cluster: Cluster, name: str) -> dict[str, Any]:
    return next(p for p in cluster.objects["Pod"] if p["metadata"]["name"] == name)


def scheduled(pod: dict[str, Any], at: float) -> dict[str, Any]:
    p = copy.deepcopy(pod)
    p["spec"]["nodeName"] = "gpu-2"
    p["status"]["phase"] = "Running"
    p["status"]["conditions"] = [o.scheduled(at)]
    p["status"]["startTime"] = o.ts(at)
    p["metadata"]["resourceVersion"] = "2"
    return p


def after_first_minute() -> Cluster:
    """The demo cluster a minute on: serve-canary placed, sweep-7 deleted while it waited."""
    c = demo_cluster()
    canary = _pod(c, "serve-canary")
    c.objects["Pod"] = [
        p for p in c.objects["Pod"] if p["metadata"]["name"] not in ("serve-canary", "sweep-7")
    ]
    c.add(scheduled(canary, NOW + 30))
    return c


class Service:
    """One process: a container on its own tracker, listing `cluster`, recording into the store at `db`."""

    def __init__(self, db: Path | StoreBackend, cluster: Cluster, clock: ManualClock) -> None:
        self.history = open_history(db) if isinstance(db, StoreBackend) else SQLiteFairnessHistory(db)
        source = ReplaySource(cluster)
        self.c = build_container(
            Settings(),
            clock=clock,
            source_health=source.feed_health,
            source_name="replay",
            history=self.history,
        )
        list_everything(self.c.queue_tracker, cluster)
        rec = fairness_recorder(self.c)
        assert rec is not None
        self.loop = TickLoop(self.c, extra=[rec.on_tick])

    async def tick(self) -> None:
        await self.loop.tick()

    def first_minute_passes(self) -> None:
        """The changes of the first minute as the watch delivers them."""
        w, c = self.c.queue_tracker, demo_cluster()
        w.on_change("Pod", "MODIFIED", orjson.dumps(scheduled(_pod(c, "serve-canary"), NOW + 30)))
        w.on_change("Pod", "DELETED", orjson.dumps(_pod(c, "sweep-7")))

    def close(self) -> None:
        self.history.close()


def rows(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    con = sqlite3.connect(db)
    try:
        return {
            t: con.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()  # noqa: S608
            for t in (
                "fairness_episodes",
                "fairness_preemptions",
                "fairness_incidents",
                "fairness_heartbeats",
            )
        }
    finally:
        con.close()


async def record_straight(db: Path | StoreBackend) -> None:
    clock = ManualClock(NOW)
    s = Service(db, demo_cluster(), clock)
    await s.tick()
    clock.t = NOW + 60
    s.first_minute_passes()
    await s.tick()
    clock.t = NOW + 125
    await s.tick()
    s.close()


async def test_each_wait_preemption_and_incident_is_recorded_and_closed(tmp_path: Path) -> None:
    db = tmp_path / "watchtower.db"
    await record_straight(db)
    h = SQLiteFairnessHistory(db)
    eps = {e.workload: e for e in h.episodes(0, NOW + 1e6)}
    assert set(eps) == {
        "Pod/debug-1",
        "Pod/serve-canary",
        "PaddleJob/bert",
        "Pod/sweep-7",
        "PaddleJob/detector",
    }
    canary, sweep, bert, detector = (
        eps[k] for k in ("Pod/serve-canary", "Pod/sweep-7", "PaddleJob/bert", "PaddleJob/detector")
    )
    assert (canary.outcome, canary.ended, canary.tier, canary.team, canary.gpus) == (
        "scheduled",
        NOW + 60,
        "high",
        "language",
        8,
    )
    assert (sweep.outcome, sweep.ended) == ("gone", NOW + 60)
    # No PodGroup object: its wait is read from its pods.
    assert (bert.outcome, bert.ended, bert.source, bert.started) == ("waiting", None, "pod", NOW - 1000)
    assert (detector.source, detector.team) == ("quota", "vision")
    incidents = {(i.kind, i.workload): i for i in h.incidents(0, NOW + 1e6)}
    # debug-1 (critical tier, 15 min) has waited 20 min: starving since 15 min after it began.
    starving = incidents[("starvation", "Pod/debug-1")]
    assert (starving.started, starving.ended) == (NOW - 20 * 60 + 15 * 60, None)
    # The bert gang holds a node while its other worker waits past the 10-minute stall limit.
    assert ("gang_stall", "PaddleJob/bert") in incidents
    (p,) = h.preemptions(0, NOW + 1e6)
    assert (p.victim_workload, p.victim_team, p.victim_tier, p.preemptor_tier) == (
        "Pod/old-batch-0",
        "vision",
        "low",
        "medium",
    )
    assert p.gpu_hours_lost == 4 * 3900 / 3600
    # Minutes recorded: NOW's, the next and the one after (ticks at +0, +60, +125 s).
    assert h.history_coverage(NOW - 3600, NOW + 3600) == 3 / 60
    h.close()


async def test_recording_twice_or_restarting_in_the_middle_leaves_the_same_rows(tmp_path: Path) -> None:
    once = tmp_path / "once.db"
    await record_straight(once)
    expected = rows(once)
    assert (
        expected["fairness_episodes"] and expected["fairness_incidents"] and expected["fairness_preemptions"]
    )

    # The same ticks again on the same store (a replica, a replay): nothing changes.
    await record_straight(once)
    assert rows(once) == expected

    # A restart after the first minute: a new process lists the cluster as it is then and goes on.
    restarted = tmp_path / "restarted.db"
    clock = ManualClock(NOW)
    first = Service(restarted, demo_cluster(), clock)
    await first.tick()
    first.close()
    clock.t = NOW + 60
    second = Service(restarted, after_first_minute(), clock)
    await second.tick()
    clock.t = NOW + 125
    await second.tick()
    second.close()
    assert rows(restarted) == expected


async def test_on_either_store_a_second_replica_records_the_same_history(
    store_backend: StoreBackend,
) -> None:
    """Every replica records (no leader): the same ticks recorded again by a second process on the same
    store leave what one process left (the restart in the middle is the SQLite test above)."""
    await record_straight(store_backend)
    reader = open_history(store_backend)
    expected = everything(reader)
    assert expected[0] and expected[1] and expected[2]
    await record_straight(store_backend)  # a second replica on the same store
    assert everything(reader) == expected
    reader.close()


async def test_a_wait_that_ends_while_the_service_is_down_is_closed_at_its_next_tick(tmp_path: Path) -> None:
    db = tmp_path / "watchtower.db"
    clock = ManualClock(NOW)
    first = Service(db, demo_cluster(), clock)
    await first.tick()
    first.close()
    clock.t = NOW + 3600
    later = Service(db, after_first_minute(), clock)
    await later.tick()
    later.close()
    h = SQLiteFairnessHistory(db)
    eps = {e.workload: e for e in h.episodes(0, NOW + 1e6)}
    assert (eps["Pod/serve-canary"].outcome, eps["Pod/serve-canary"].ended) == ("scheduled", NOW + 3600)
    assert eps["Pod/sweep-7"].outcome == "gone"
    # An hour without ticks is not recorded time.
    assert h.history_coverage(NOW - 7200, NOW + 7200) == 2 / 60
    h.close()


async def test_unchanged_ticks_write_nothing_but_the_heartbeat(tmp_path: Path) -> None:
    db = tmp_path / "watchtower.db"
    clock = ManualClock(NOW)
    s = Service(db, demo_cluster(), clock)
    await s.tick()
    before = rows(db)
    clock.t = NOW + 20
    await s.tick()  # the same minute: nothing at all
    assert rows(db) == before
    s.close()


def test_old_history_is_pruned(tmp_path: Path) -> None:
    from watchtower.domain.fairness.history import WaitEpisode

    h = SQLiteFairnessHistory(tmp_path / "watchtower.db")
    old = WaitEpisode("wait:a", "pod", "ns", "t", "low", "Pod/a", 1, 100.0, 200.0, "scheduled")
    still = WaitEpisode("wait:b", "pod", "ns", "t", "low", "Pod/b", 1, 100.0, None, "waiting")
    h.record([old, still], heartbeats=[120.0, 600.0])
    assert h.prune_history(before=300.0) == 2  # the closed episode and the first heartbeat
    assert [e.key for e in h.episodes(0, 1e9)] == ["wait:b"]
    h.close()


async def test_a_job_kueue_holds_is_one_episode_from_its_workload_to_its_pods(tmp_path: Path) -> None:
    """tests/fixtures/real/kueue-shaped-*.json: the Workload pending at the ClusterQueue's quota, then admitted."""
    import json

    real = Path(__file__).resolve().parents[1] / "fixtures" / "real"
    kinds = {"Workload": "KueueWorkload"}
    history = SQLiteFairnessHistory(tmp_path / "watchtower.db")
    clock = ManualClock(NOW + 20 * 60)
    c = build_container(
        Settings(),
        clock=clock,
        source_health=ReplaySource(demo_cluster()).feed_health,
        source_name="replay",
        history=history,
    )
    for obj in json.loads((real / "kueue-shaped-job-pending.json").read_text())["items"]:
        c.queue_tracker.on_change(kinds.get(obj["kind"], obj["kind"]), "ADDED", orjson.dumps(obj))
    rec = fairness_recorder(c)
    assert rec is not None
    loop = TickLoop(c, extra=[rec.on_tick])
    await loop.tick()
    (held,) = history.episodes(0, NOW + 1e6)
    assert (held.workload, held.source, held.outcome) == ("Job/resnet", "kueue", "waiting")
    admitted = json.loads((real / "kueue-shaped-workload-admitted.json").read_text())
    c.queue_tracker.on_change("KueueWorkload", "MODIFIED", orjson.dumps(admitted))
    clock.t += 60
    await loop.tick()
    # Admitted, its pods not running yet: the same wait goes on (the queue keeps its start), now read from pods.
    (same,) = history.episodes(0, NOW + 1e6)
    assert (same.key, same.started, same.source, same.ended) == (held.key, held.started, "pod", None)
    history.close()


class Follower(SoleLeader):
    """A replica that does not hold the Lease (the fence as a LeaderElector answers while following)."""

    def term(self) -> int | None:
        return None

    def holds(self, term: int) -> bool:
        return False


async def test_a_follower_records_as_the_leader_does(tmp_path: Path) -> None:
    """Leader election gates alerting and the weekly send, not the history: every replica records."""
    h = SQLiteFairnessHistory(tmp_path / "watchtower.db")
    source = ReplaySource(demo_cluster())
    c = build_container(
        Settings(),
        clock=ManualClock(NOW),
        source_health=source.feed_health,
        source_name="replay",
        history=h,
        leadership=Follower(),
    )
    list_everything(c.queue_tracker, demo_cluster())
    rec = fairness_recorder(c)
    assert rec is not None and c.leadership.term() is None
    await TickLoop(c, extra=[rec.on_tick]).tick()
    assert h.episodes(0, NOW + 1e6) and h.history_coverage(NOW - 60, NOW + 60) > 0
    h.close()
