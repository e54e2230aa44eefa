"""Start estimates: a waiting workload's place in its tier and when it may start, from recent waits."""

from __future__ import annotations

from tests.unit.domain.helpers import NS, T0, evaluate, state_of
from watchtower.domain.estimate import ScheduleHistory
from watchtower.simulator import objects as o

MIN = 60.0


def _history(waits_min: list[float], *, tier: str = "medium", at: float = T0 - 600) -> ScheduleHistory:
    h = ScheduleHistory(window=6 * 3600, min_samples=3)
    for i, w in enumerate(waits_min):
        h.record(tier, at=at + i, wait=w * MIN)
    return h


def _queue(*waited_min: float):
    pods = [
        o.pod(name=f"w{i}", namespace=NS, created=T0 - m * MIN, gpus=1, priority=500_000)
        for i, m in enumerate(waited_min)
    ]
    snap = evaluate(state_of(*pods), T0)
    return {w.name: w for w in snap.workloads}


def test_the_estimate_is_the_median_of_the_longer_recent_waits_minus_the_wait_so_far() -> None:
    # Recent medium waits (min): 2, 4, 6, 10, 14, 20, 30. A workload that has waited 5 min: the longer
    # ones are 6, 10, 14, 20, 30, median 14 → starts in about 9 min.
    waits = _history([2, 4, 6, 10, 14, 20, 30]).waits(T0)
    w = _queue(5)["w0"]
    e = waits.estimate(w)
    assert e is not None
    assert (e.position, e.start_in, e.at, e.samples) == (1, 9 * MIN, T0 + 9 * MIN, 5)
    assert e.text == (
        "estimate: starts in about 9m (from 5 medium pods scheduled in the last 6 h that waited longer "
        "than its 5m: median 14m)"
    )


def test_with_no_wait_yet_every_recent_wait_counts_and_an_even_count_takes_the_middle_two() -> None:
    waits = _history([2, 4, 6, 10]).waits(T0)
    e = waits.estimate(_queue(0)["w0"])
    assert e is not None and e.start_in == 5 * MIN
    assert e.basis == "from 4 medium pods scheduled in the last 6 h: median 5m"


def test_the_position_counts_its_own_tier_only_from_one() -> None:
    ws = _queue(30, 20, 10)
    waits = _history([]).waits(T0)
    assert [waits.estimate(ws[n]).position for n in ("w0", "w1", "w2")] == [1, 2, 3]


def test_too_little_history_is_no_estimate_with_the_reason() -> None:
    waits = _history([2, 4, 6, 10, 14]).waits(T0)
    e = waits.estimate(_queue(9)["w0"])  # only 10 and 14 waited longer than 9 min
    assert e is not None and e.start_in is None and e.at is None
    assert e.text == (
        "no estimate: only 2 of 5 medium pods scheduled in the last 6 h waited longer than its 9m "
        "(at least 3 needed)"
    )


def test_no_history_of_the_tier_at_all_says_so() -> None:
    waits = _history([2, 4, 6], tier="high").waits(T0)
    e = waits.estimate(_queue(1)["w0"])
    assert e is not None and e.text == "no estimate: no medium pods scheduled in the last 6 h"


def test_waits_older_than_the_window_are_forgotten() -> None:
    h = _history([2, 4, 6], at=T0 - 7 * 3600)
    h.record("medium", at=T0 - 60, wait=8 * MIN)
    assert h.waits(T0).waits["medium"] == (8 * MIN,)


def test_out_of_order_waits_are_kept_in_time_order() -> None:
    h = ScheduleHistory(window=3600, min_samples=1)
    h.record("low", at=T0 - 10, wait=1.0)
    h.record("low", at=T0 - 4000, wait=2.0)  # a replay of an older binding
    assert h.waits(T0).waits["low"] == (1.0,)
    assert h.last_bound == {"": T0 - 10}
