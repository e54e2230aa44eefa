"""The QueueTracker: a source's objects become state, metrics and snapshots handed to the consumers."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from tests.fixtures.scenario import (
    NO_GPU,
    NOW,
    ManualClock,
    ReplaySource,
    base_cluster,
    demo_cluster,
    list_everything,
)
from watchtower.adapters.metrics.queue import feed_health_of
from watchtower.api.container import Container
from watchtower.bootstrap import build_container
from watchtower.domain.health import KindFreshness, SourceHealth
from watchtower.domain.queue import QueueSnapshot
from watchtower.domain.tick import Tick
from watchtower.runtime.tick_loop import TickLoop
from watchtower.simulator import objects as o


def make(cluster: Any = None, **settings_update: Any) -> tuple[Container, ReplaySource, ManualClock]:
    from watchtower.config import Settings

    clock = ManualClock()
    source = ReplaySource(cluster if cluster is not None else demo_cluster())
    s = Settings()
    if settings_update:
        s = s.model_copy(update=settings_update)
    return (
        build_container(s, clock=clock, source_health=source.feed_health, source_name="test"),
        source,
        clock,
    )


def sample(c: Container, name: str, **labels: str) -> float | None:
    return c.metrics.registry.get_sample_value(name, labels)


def pending_pod(name: str, **kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "name": name,
        "namespace": "vision",
        "created": NOW - 100,
        "gpus": 1,
        "priority": 1_000_000,
        "priority_class": "urgent-debug",
        "conditions": [o.unschedulable(NOW - 90, NO_GPU)],
    }
    args.update(kw)
    return o.pod(**args)


def test_a_pod_leaving_the_queue_is_observed_once_in_its_tiers_time_to_schedule() -> None:
    c, _, clock = make(base_cluster())
    w = c.queue_tracker
    list_everything(w, base_cluster())
    p = pending_pod("debug-2")
    w.on_change("Pod", "ADDED", orjson.dumps(p))
    bound = pending_pod("debug-2", node="gpu-0", conditions=[o.scheduled(NOW - 40)], uid=p["metadata"]["uid"])
    w.on_change("Pod", "MODIFIED", orjson.dumps(bound))
    w.on_change("Pod", "MODIFIED", orjson.dumps(bound))  # a replay adds nothing
    assert sample(c, "watchtower_time_to_schedule_seconds_count", tier="critical") == 1
    assert sample(c, "watchtower_time_to_schedule_seconds_sum", tier="critical") == 60
    assert sample(c, "watchtower_time_to_schedule_seconds_bucket", tier="critical", le="60.0") == 1
    assert sample(c, "watchtower_time_to_schedule_seconds_bucket", tier="critical", le="30.0") == 0


def test_time_to_schedule_buckets_reach_a_day_and_include_the_tier_thresholds() -> None:
    c, _, _ = make(base_cluster())
    c.metrics.time_to_schedule.labels("low").observe(1.0)
    text = c.metrics.render().decode()
    bounds = {
        float(line.split('le="')[1].split('"')[0])
        for line in text.splitlines()
        if line.startswith("watchtower_time_to_schedule_seconds_bucket") and "+Inf" not in line
    }
    assert max(bounds) >= 86400
    assert {300.0, 900.0, 7200.0, 28800.0} <= bounds


def test_preemption_is_counted_once_with_the_preemptor_tier_from_the_later_event() -> None:
    cluster = demo_cluster()
    events = cluster.objects["Event"]
    preempted = [e for e in events if e["reason"] == "Preempted"]
    cluster.objects["Event"] = [e for e in events if e["reason"] != "Preempted"]
    c, _, clock = make(cluster)
    w = c.queue_tracker
    list_everything(w, cluster)
    w.evaluate(clock.now())
    # The condition came first; the event naming the preemptor has not arrived: nothing counted yet.
    assert sample(c, "watchtower_preemptions_total", victim_tier="low", preemptor_tier="unknown") is None
    w.on_change("Event", "ADDED", orjson.dumps(preempted[0]))
    assert sample(c, "watchtower_preemptions_total", victim_tier="low", preemptor_tier="medium") == 1
    lost = sample(c, "watchtower_preemption_gpu_hours_lost_total", victim_tier="low", preemptor_tier="medium")
    assert lost == pytest.approx(4 * 3900 / 3600)
    # A re-list after 410 Gone replays everything: still one.
    list_everything(w, demo_cluster())
    clock.t += 3600
    w.evaluate(clock.now())
    assert sample(c, "watchtower_preemptions_total", victim_tier="low", preemptor_tier="medium") == 1
    assert sample(c, "watchtower_preemptions_total", victim_tier="low", preemptor_tier="unknown") is None


def test_preemption_without_a_preemptor_event_is_counted_as_unknown_after_the_grace_period() -> None:
    cluster = demo_cluster()
    cluster.objects["Event"] = [e for e in cluster.objects["Event"] if e["reason"] != "Preempted"]
    c, _, clock = make(cluster)
    w = c.queue_tracker
    list_everything(w, cluster)
    w.evaluate(clock.now())
    assert sample(c, "watchtower_preemptions_total", victim_tier="low", preemptor_tier="unknown") is None
    clock.t += w.preemptions.attribution_grace + 1
    w.evaluate(clock.now())
    assert sample(c, "watchtower_preemptions_total", victim_tier="low", preemptor_tier="unknown") == 1


def test_a_malformed_object_is_skipped_counted_and_the_feed_goes_on() -> None:
    c, _, clock = make(base_cluster())
    w = c.queue_tracker
    list_everything(w, base_cluster())
    broken = pending_pod("no-uid")
    del broken["metadata"]["uid"]
    w.on_change("Pod", "ADDED", orjson.dumps(broken))
    w.on_change("Pod", "ADDED", b"{not json")
    w.on_change("Pod", "ADDED", orjson.dumps(pending_pod("fine")))
    assert sample(c, "watchtower_malformed_objects_skipped_total", kind="Pod") == 2
    snap = w.evaluate(clock.now()).snapshot
    assert [x.name for x in snap.waiting()] == ["fine"]


def test_pending_gauges_say_tier_namespace_and_main_reason_and_replace_the_previous_evaluation() -> None:
    c, _, clock = make()
    w = c.queue_tracker
    list_everything(w, demo_cluster())
    w.evaluate(clock.now())
    assert (
        sample(
            c,
            "watchtower_pending_workloads",
            tier="critical",
            namespace="ops",
            reason="Insufficient nvidia.com/gpu",
        )
        == 1
    )
    assert sample(c, "watchtower_pending_workloads", tier="low", namespace="vision", reason="quota") == 1
    assert sample(c, "watchtower_oldest_wait_seconds", tier="critical") == 1200
    assert sample(c, "watchtower_partial_gangs", tier="medium") == 1
    assert sample(c, "watchtower_partial_gang_gpus_held", tier="medium") == 4
    assert sample(c, "watchtower_quota_gpus_used", namespace="vision", resourcequota="gpu-quota") == 16
    assert sample(c, "watchtower_quota_gpus_hard", namespace="vision", resourcequota="gpu-quota") == 16
    # The debug pod goes away: the next evaluation no longer reports it.
    debug = next(p for p in demo_cluster().objects["Pod"] if p["metadata"]["name"] == "debug-1")
    w.on_change("Pod", "DELETED", orjson.dumps(debug))
    w.evaluate(clock.now())
    assert (
        sample(
            c,
            "watchtower_pending_workloads",
            tier="critical",
            namespace="ops",
            reason="Insufficient nvidia.com/gpu",
        )
        is None
    )
    assert sample(c, "watchtower_oldest_wait_seconds", tier="critical") == 0


async def test_tick_hands_the_snapshot_to_every_consumer_even_when_one_fails() -> None:
    c, _, clock = make()
    w = c.queue_tracker
    list_everything(w, demo_cluster())
    got: list[tuple[QueueSnapshot, float]] = []

    async def broken(tick: Tick) -> None:
        raise RuntimeError("alerting is down")

    async def recorder(tick: Tick) -> None:
        got.append((tick.snapshot, tick.at))

    picture = await TickLoop(c, extra=[broken, recorder]).tick()
    assert got == [(picture.snapshot, NOW)]
    assert w.latest is picture
    assert sample(c, "watchtower_snapshot_consumer_failures_total", consumer=broken.__qualname__) == 1


async def test_the_scheduler_runs_the_evaluation_tick_and_the_first_full_listing_evaluates_at_once() -> None:
    from watchtower.config.model import QueueConfig

    c, source, _ = make(queue=QueueConfig(evaluate_every=3600))
    w = c.queue_tracker
    ticks: list[float] = []

    async def recorder(tick: Tick) -> None:
        ticks.append(tick.at)

    loop = TickLoop(c, extra=[recorder])
    w.on_listed = loop.kick
    scheduler = AsyncIOScheduler()
    loop.schedule(scheduler)
    scheduler.start()
    feed = asyncio.create_task(source.run(on_list=w.on_list, on_change=w.on_change))
    try:
        for _ in range(500):
            if w.latest is not None and w.latest.snapshot.waiting():
                break
            await asyncio.sleep(0.01)
    finally:
        feed.cancel()
        scheduler.shutdown(wait=False)
    assert w.latest is not None
    assert {x.name for x in w.latest.snapshot.waiting()} >= {"debug-1", "bert", "sweep-7"}
    assert ticks


def test_readiness_needs_every_kind_listed_and_a_fresh_feed_and_says_which_kind_is_stale() -> None:
    c, source, _ = make()
    w = c.queue_tracker
    r = w.readiness()
    assert not r.ready
    assert "Pod: not listed yet" in r.problems
    list_everything(w, demo_cluster())
    source.listed = set(demo_cluster().objects)
    assert w.readiness().ready
    assert w.readiness().detail["kinds"]["Pod"]["objects_at_list"] == len(demo_cluster().objects["Pod"])
    source.stale_seconds = 600.0
    r = w.readiness()
    assert not r.ready
    assert r.detail["kinds"]["Event"]["stale_seconds"] == 600.0
    assert any("600s stale" in p for p in r.problems)
    source.stale_seconds, source.healthy = 0.0, False
    assert "the cluster source reports itself unhealthy" in w.readiness().problems


def test_feed_health_reads_per_kind_restarts_and_staleness_from_the_kubernetes_adapter_shape() -> None:
    h = feed_health_of(
        SourceHealth(
            healthy=True,
            stale_seconds=3.5,
            kinds={
                "Pod": KindFreshness(restarts=2, stale_seconds=3.5),
                "Node": KindFreshness(restarts=0, stale_seconds=0.0),
            },
        )
    )
    assert h.restarts == {"Pod": 2, "Node": 0}
    assert h.staleness == {"Pod": 3.5, "Node": 0.0}
    assert h.stale_seconds == 3.5
    # A source that reports nothing per kind (the simulator) gives no numbers rather than an error.
    assert feed_health_of(SourceHealth(healthy=True)).restarts == {}


def test_the_change_log_holds_no_more_than_the_events_since_the_last_tick() -> None:
    # Each pod event adds an entry to the state's change log; kept once every tick had read it, the
    # service's memory grew with every event it ever saw (the soak: 500 events/s, +1 MiB a minute).
    c, _, clock = make(base_cluster())
    w = c.queue_tracker
    list_everything(w, base_cluster())
    pods = [pending_pod(f"debug-{i}") for i in range(20)]
    for p in pods:
        w.on_change("Pod", "ADDED", orjson.dumps(p))
    w.evaluate(clock.now())
    for tick in range(50):
        for k, p in enumerate(pods):
            p["metadata"].setdefault("annotations", {})["watchtower.io/note"] = f"churn {tick}.{k}"
            w.on_change("Pod", "MODIFIED", orjson.dumps(p))
        assert len(w.state.log.changes) == len(pods)
        clock.t += 1
        w.evaluate(clock.now())
        assert len(w.state.log.changes) == 0
    # Read by difference from the shortened log, a tick still shows what changed since the last one.
    for p in pods[:5]:
        p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "4"
        p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"
        w.on_change("Pod", "MODIFIED", orjson.dumps(p))
    asked = sorted(x.facts.gpus_per_pod for x in w.evaluate(clock.now() + 1).snapshot.workloads)
    assert asked == [1] * 15 + [4] * 5


def test_gated_work_is_counted_as_waiting_with_reason_gated_and_by_its_gates_owner() -> None:
    c, _, clock = make()
    w = c.queue_tracker
    list_everything(w, demo_cluster())
    gated = o.condition("PodScheduled", "False", NOW - 90, reason="SchedulingGated", message="gated")
    for name, gates in (("held-k", ["kueue.x-k8s.io/admission"]), ("held-x", ["example.com/prefetch"])):
        pod = pending_pod(name, scheduling_gates=gates, conditions=[gated])
        w.on_change("Pod", "ADDED", orjson.dumps(pod))
    w.evaluate(clock.now())
    reason = {"tier": "critical", "namespace": "vision", "reason": "gated"}
    assert sample(c, "watchtower_pending_workloads", **reason) == 2
    assert sample(c, "watchtower_gated_workloads", tier="critical", owner="kueue") == 1
    assert sample(c, "watchtower_gated_workloads", tier="critical", owner="other") == 1
    assert sample(c, "watchtower_gated_pods") == 2
    w.on_change(
        "Pod", "DELETED", orjson.dumps(pending_pod("held-k", scheduling_gates=["kueue.x-k8s.io/admission"]))
    )
    w.evaluate(clock.now())
    assert sample(c, "watchtower_gated_workloads", tier="critical", owner="kueue") is None
    assert sample(c, "watchtower_pending_workloads", **reason) == 1


def test_a_quota_refusal_with_an_unreadable_quantity_is_a_counted_logged_skip_of_never(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The refusal still blocks the work; only whether it can never start is left unsaid, said once."""
    c, _, clock = make(base_cluster())
    w = c.queue_tracker
    list_everything(w, base_cluster())
    odd = o.core_event(
        namespace="vision",
        reason="FailedCreate",
        message='Error creating: pods "odd-x" is forbidden: exceeded quota: gpu-quota, requested: '
        "requests.nvidia.com/gpu=lots, used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=8",
        type_="Warning",
        component="job-controller",
        involved={
            "kind": "Job",
            "namespace": "vision",
            "name": "odd",
            "uid": "odd-uid",
            "apiVersion": "batch/v1",
        },
        at=clock.now() - 60,
        last=clock.now() - 30,
        count=2,
    )
    w.on_change("Event", "ADDED", orjson.dumps(odd))
    with caplog.at_level("WARNING", logger="watchtower.services.queue_tracker"):
        snap = w.evaluate(clock.now()).snapshot
        w.evaluate(clock.now() + 1)
    job = next(x for x in snap.waiting() if x.name == "odd")
    assert job.state.value == "quota_blocked" and job.never is None
    # Read well and left out (the never verdict), not a malformed object: no WatchtowerObjectsUnreadable.
    assert sample(c, "watchtower_objects_left_out_total", kind="ResourceQuota", reason="never_undecided") == 1
    assert sample(c, "watchtower_malformed_objects_skipped_total", kind="ResourceQuota") is None
    told = [r.getMessage() for r in caplog.records if "can never start" in r.getMessage()]
    assert len(told) == 1 and "vision/Job/odd" in told[0] and "requests.nvidia.com/gpu" in told[0]
