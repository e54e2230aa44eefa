"""Time-to-schedule and start-up latency per tier, as distributions."""

from __future__ import annotations

from tests.unit.domain.helpers import T0, TIERS
from watchtower.domain.latency import Distribution, latency_by_tier, quantile
from watchtower.domain.records import Condition, Pod


def bound(uid: str, wait: float, startup: float | None, priority: int = 0) -> Pod:
    return Pod(
        uid,
        "ns",
        uid,
        T0,
        phase="Running",
        priority=priority,
        gpus=1,
        node="n",
        scheduled=Condition("True", since=T0 + wait),
        running_since=T0 + wait + startup if startup is not None else None,
    )


def test_nearest_rank_quantiles():
    s = [float(i) for i in range(1, 101)]
    assert (quantile(s, 0.5), quantile(s, 0.95), quantile(s, 1.0)) == (50.0, 95.0, 100.0)
    assert Distribution.of([]) == Distribution(0, None, None, None)


def test_latency_split_between_queue_wait_and_image_pull_per_tier():
    pods = [bound(f"p{i}", wait=10.0 * i, startup=5.0) for i in range(1, 11)]
    pods.append(bound("pulling", wait=30.0, startup=None))  # bound, image still pulling
    pods.append(bound("crit", wait=1.0, startup=2.0, priority=1_000_000))
    pods.append(Pod("w", "ns", "w", T0, gpus=1))  # still waiting: censored, not a sample
    rows = {r.tier: r for r in latency_by_tier(pods, TIERS)}
    low = rows["low"]
    assert (low.time_to_schedule.count, low.time_to_schedule.p50, low.time_to_schedule.max) == (
        11,
        50.0,
        100.0,
    )
    assert low.time_to_schedule.censored == 1
    assert (low.startup.count, low.startup.p95) == (10, 5.0)
    assert (rows["critical"].time_to_schedule.p50, rows["critical"].startup.p50) == (1.0, 2.0)
    assert rows["high"].time_to_schedule.count == 0


def test_gpu_hours_lost_is_gpus_times_run_time():
    from watchtower.domain.disruptions import Preemption

    p = Preemption("u", "ns", "n", at=T0 + 5400, victim_gpus=4, victim_started=T0)
    assert p.gpu_hours_lost == 6.0
    assert Preemption("u", "ns", "n", at=T0).gpu_hours_lost is None
