"""Preemption outcomes on the simulated cluster (its scheduler nominates, evicts and binds as kube-scheduler
does): /metrics counts every judged victim once, by the outcome its record shows, and the GPU-hours of those
that did not help are the ones their records lost."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.unit.services.test_churn_metrics import _run, _samples


def test_every_judged_victim_is_counted_once_by_the_outcome_its_record_shows() -> None:
    _, tracker, registry, tick = _run(60)
    tiers = tracker.policy.tiers
    recs = [p for p in tracker.state.ledger.preemptions.values() if p.outcome is not None]
    assert {p.outcome.verdict for p in recs} == {"helped", "did_not_help"}
    want = Counter(
        (p.preemptor_tier(tiers) or "unknown", p.victim_tier(tiers) or "unknown", p.outcome.verdict)
        for p in recs
    )
    got = {
        (d["preemptor_tier"], d["victim_tier"], d["outcome"]): v
        for k, v in _samples(registry, "watchtower_preemption_outcomes_total").items()
        for d in [dict(k)]
    }
    assert got == dict(want)
    unhelpful = [p for p in recs if not p.outcome.helped]
    assert sum(_samples(registry, "watchtower_preemptions_unhelpful_total").values()) == len(unhelpful)
    lost = sum(_samples(registry, "watchtower_preemptions_unhelpful_gpu_hours_total").values())
    assert lost == pytest.approx(sum(p.gpu_hours_lost or 0.0 for p in unhelpful))
    # The snapshot the API presents carries the same outcomes.
    shown = {p.victim_uid: p.outcome for p in tick.snapshot.preemptions if p.outcome is not None}
    assert shown == {p.victim_uid: p.outcome for p in recs if p.victim_uid in shown}
