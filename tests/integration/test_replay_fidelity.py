"""Fidelity: the demo's past week (the simulator is the ground truth) replayed under the demo's own policy,
each tier's p50 and p95 wait set beside what the simulator did, as the replay page's fidelity table does.

Real parts: the demo's simulated cluster (its seed + 1, warm start and story, as `watchtower demo` runs its past
week; about 30 s of CPU for the whole week, so the whole week is run), the trace the simulator's record of
each workload makes (simulator/replay_trace.py) and the replay engine. Only the recorder and the store are
left out: the replay reads the simulator's own record, not what Watchtower made of it.

Issue 31 asks each tier's p50 and p95 within 15 %. That is not met yet (docs/replay.md, "How close the
replay comes", says by how much and why): the strict xfail below fails the day it is, so it can be made a
plain assertion then."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC
from typing import Any

import pytest

from watchtower.commands.demo.past_week import STEP
from watchtower.commands.demo.settings import demo_simulator
from watchtower.commands.demo.warm import demo_cluster
from watchtower.config.model import Settings
from watchtower.domain.fairness.week import IsoWeek
from watchtower.replay.engine import replay
from watchtower.services.replay import fidelity as fidelity_of
from watchtower.simulator.replay_trace import demo_policy, trace_of

WEEK = IsoWeek(
    2025, 52
)  # the past week of the demo's default clock (tests/integration/test_demo_past_week.py)


@pytest.fixture(scope="module")
def fidelity() -> Iterator[dict[str, Any]]:
    settings = Settings()
    cfg = settings.simulator.model_copy(
        update={"seed": settings.simulator.seed + 1, "metrics_port": 0, **demo_simulator(settings.simulator)}
    )
    start, end = WEEK.bounds(UTC)
    sim = demo_cluster(cfg, start=start)
    seen = {id(w): w for w in sim.workloads}
    while sim.now() < end:
        sim.step(min(STEP, end - sim.now()))
        sim.drain()
        for w in sim.workloads:
            seen.setdefault(id(w), w)
    policy = demo_policy(cfg, settings.tiers)
    trace = trace_of(seen.values(), policy.tier_policy())
    run = replay(trace.jobs, policy)
    # As the replay page's table: the jobs of the week with an observed start that the replay started
    # too, each side's wait to the first start (the warm start's jobs, submitted before the week, left out).
    week = [j for j in trace.jobs if j.submitted >= start]
    close = fidelity_of(week, run, [t.name for t in settings.tiers])
    assert close is not None
    tiers = {g["tier"]: g for g in close["tiers"]}
    yield {"trace": trace, "run": run, "tiers": tiers, "sim": sim}


def test_every_workload_of_the_week_is_replayed_and_what_is_left_out_is_counted(
    fidelity: dict[str, Any],
) -> None:
    trace, run = fidelity["trace"], fidelity["run"]
    assert len(trace.jobs) > 4000  # ~40 arrivals an hour for a week, and the warm start's
    assert set(trace.skipped) <= {
        "asks its GPUs through a DRA claim",
        "a bare pod its team's quota refused (the API never made it)",
    }
    # The demo's one job larger than any node (issue 30's never-startable work) is refused by the replay as
    # the simulator never started it; every other job fits the demo's nodes and quotas.
    started = {j.id: j.started for j in trace.jobs}
    refused = [o for o in run.jobs if o.refused]
    assert len(refused) == 1, [o.refused for o in refused]
    assert "no node has that much" in refused[0].refused and started[refused[0].id] is None
    # Every other job finishes but those people deleted before they started (their quota refused them too
    # long): in the simulator, or in the replay after the same two hours (the demo's policy's give_up_after).
    assert all(o.finished is not None for o in run.jobs if o.deleted is None and not o.refused)
    deleted = {o.id for o in run.jobs if o.deleted is not None}
    assert {j.id for j in trace.jobs if j.deleted is not None} <= deleted | {
        o.id for o in run.jobs if o.started
    }


def test_the_replay_keeps_the_tiers_in_the_simulators_order(fidelity: dict[str, Any]) -> None:
    tiers = fidelity["tiers"]
    for side in ("observed", "replayed"):
        # The low tier, which never preempts and is the one preempted, waits longest at the tail.
        low = tiers["low"][side]["p95"]
        assert all(tiers[t][side]["p95"] <= low for t in ("critical", "high", "medium")), (side, tiers)
    print(
        "\n".join(
            f"{t:9} {v['jobs']:5} jobs  observed p50 {v['observed']['p50'] / 60:6.1f} p95 "
            f"{v['observed']['p95'] / 60:6.1f} min   replayed p50 {v['replayed']['p50'] / 60:6.1f} p95 "
            f"{v['replayed']['p95'] / 60:6.1f} min"
            for t, v in tiers.items()
        )
    )


@pytest.mark.xfail(strict=True, reason="issue 31 item 6: not within 15 % yet (docs/replay.md says why)")
def test_each_tiers_p50_and_p95_wait_is_within_15_percent_of_the_simulators(fidelity: dict[str, Any]) -> None:
    for tier, v in fidelity["tiers"].items():
        for k in ("p50", "p95"):
            seen, got = v["observed"][k], v["replayed"][k]
            # A wait under a minute is the image pull and the controllers' tick: compared in absolute terms.
            assert abs(got - seen) <= max(0.15 * seen, 60.0), (tier, k, seen, got)
