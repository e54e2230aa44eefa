"""The demo's timeline on the simulated clock: what the README's Demo section promises, sampled as a user would."""

from __future__ import annotations

import pytest

from tests.unit.simulator.helpers import Watched
from watchtower.commands.demo.story import GANG_NAME, NEVER_JOB, PRODUCTION_TEAM
from watchtower.commands.demo.warm import demo_cluster
from watchtower.config.model import Settings, SimulatorConfig
from watchtower.domain.alerts.rules import RuleInput, evaluate_rules
from watchtower.domain.queue import WorkloadState

WAITING = (WorkloadState.PENDING, WorkloadState.PARTIAL)


@pytest.mark.parametrize("seed", [7, 1, 42])
def test_the_first_two_hours_show_every_tier_waiting_the_sweep_warning_and_preemptions_by_critical_work(
    seed: int,
) -> None:
    sim = demo_cluster(SimulatorConfig(seed=seed))
    w = Watched(sim)
    tiers_seen: list[set[str]] = []
    sweep_waits: list[float] = []
    quota_blocked = partial_gang = False
    higher_minutes = 0
    for minute in range(121):  # one real second of the demo each, at 60x
        snap = w.snapshot()
        waiting = snap.waiting()
        tiers = {s.tier for s in waiting}
        higher_minutes += bool(tiers - {"low"})
        if minute % 20 == 0:
            tiers_seen.append(tiers)
        sweep_waits += [s.wait_seconds for s in waiting if s.key.name == "sweep-lr" and s.state in WAITING]
        quota_blocked |= any(s.state is WorkloadState.QUOTA_BLOCKED for s in waiting)
        partial_gang |= any(s.state is WorkloadState.PARTIAL and s.gang for s in waiting)
        w.step(60)
    assert set().union(*tiers_seen) == {"critical", "high", "medium", "low"}
    # Not "almost only the low tier": a higher tier waits most of the time, not in one sample now and then.
    assert higher_minutes > 60, (higher_minutes, tiers_seen)
    # The sweep may not preempt: it waits past the medium tier's 30-minute warning.
    assert max(sweep_waits) >= 1800
    assert quota_blocked and partial_gang
    by_uid = {p.uid: p for p in w.state.pods.values()}
    prod = [
        p
        for p in w.snapshot().preemptions
        if p.preemptor_uid in by_uid and by_uid[p.preemptor_uid].namespace == f"team-{PRODUCTION_TEAM}"
    ]
    assert prod, "no scripted critical or serving work preempted anything"
    assert any(by_uid[p.preemptor_uid].priority_class == "urgent-debug" for p in prod)
    assert all((p.victim_priority or 0) < by_uid[p.preemptor_uid].priority for p in prod)
    assert any((p.victim_priority or 0) < 500_000 for p in prod), "no low-tier victim"


@pytest.mark.parametrize("seed", [7, 1, 42])
def test_within_the_first_minutes_a_gang_is_held_one_pod_short_and_watchtower_says_why(seed: int) -> None:
    """The 1.36 gang's pods have no condition and no event: only Watchtower's words say why they wait."""
    sim = demo_cluster(SimulatorConfig(seed=seed))
    w = Watched(sim)
    seen = None
    for _minute in range(5):
        w.step(60)
        seen = next((s for s in w.snapshot().waiting() if s.key.name == GANG_NAME), None) or seen
    assert seen is not None
    assert seen.state is WorkloadState.PENDING
    assert seen.why == "gang incomplete: 3 of minCount 4 pods exist"
    assert (seen.source, seen.pods_expected, seen.pods_existing) == ("podgroup", 4, 3)
    held = [p for p in sim.pods.values() if p.name.startswith(f"{GANG_NAME}-")]
    assert len(held) == 3 and all(p.sched_cond is None for p in held)


@pytest.mark.parametrize("seed", [7, 42])
def test_the_demo_shows_one_pod_that_can_never_start_and_nothing_else_called_so(seed: int) -> None:
    """The story's 16-GPU pod on 8-GPU nodes can never start; the rest of the demo's waiting work, busy nodes
    and used-up quotas included, may start once room frees and is never called never."""
    sim = demo_cluster(SimulatorConfig(seed=seed))
    w = Watched(sim)
    never: dict[str, str] = {}
    alerted: set[str] = set()
    settings = Settings()
    for _minute in range(30):
        w.step(60)
        snap = w.snapshot()
        for s in snap.waiting():
            if s.never is not None:
                never[s.key.name] = s.why
        fired = evaluate_rules(
            RuleInput(
                snapshot=snap,
                now=snap.at,
                tiers=settings.queue_policy().tiers,
                settings=settings.rule_settings(),
            )
        )
        alerted |= {c.labels["workload"] for c in fired if c.labels["alertname"] == "WorkloadCanNeverStart"}
    assert set(never) == {NEVER_JOB}, never
    assert never[NEVER_JOB].startswith(
        "can never start as configured: asks 16 GPUs per pod, the largest schedulable node has 8"
    )
    assert alerted == {NEVER_JOB}
