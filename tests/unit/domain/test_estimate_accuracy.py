"""How good the start estimates were: a known history of estimates and starts, its errors worked out by hand
in the comments, and what a person waiting then reads beside a new estimate."""

from __future__ import annotations

import pytest

from tests.unit.domain.helpers import POLICY, T0, apply, pending_pod, running_pod
from watchtower.domain.estimate import ScheduleHistory, StartEstimate
from watchtower.domain.estimate_accuracy import (
    OUTCOME_GONE,
    OUTCOME_STARTED,
    OUTCOME_WAITING,
    GivenEstimate,
    accuracy,
    errors_of,
)
from watchtower.domain.estimate_record import RETRY_EVERY, EstimateBook, book_from_store, record_estimates
from watchtower.domain.queue import QueueEvaluator
from watchtower.domain.state import ClusterState
from watchtower.domain.tick import Tick

# (estimated start, actual start), seconds after the estimate was given (at 0, when each wait began).
# signed = E - S; relative = signed / max(S, 60); ratio = max(S, 60) / max(E, 60).
KNOWN = [
    (600, 600),  # 1: signed 0, relative 0, ratio 1
    (600, 900),  # 2: signed -300, relative -1/3, ratio 1.5
    (600, 400),  # 3: signed +200, relative +0.5 (within: the bound counts), ratio 2/3
    (1200, 1800),  # 4: signed -600, relative -1/3, ratio 1.5
    (1200, 3600),  # 5: signed -2400, relative -2/3 (outside), ratio 3
    (300, 30),  # 6: started within a minute: S counts as 60; signed +270, relative 4.5 (outside), ratio 0.2
    (900, 1000),  # 7: signed -100, relative -0.1, ratio 1.111
    (900, 800),  # 8: signed +100, relative +0.125, ratio 0.889
    (1800, 1200),  # 9: signed +600, relative +0.5 (within), ratio 2/3
    (1800, 2400),  # 10: signed -600, relative -0.25, ratio 1.333
]
# Within ±50 %: all but 5 and 6 → 8 of 10.
# |relative| ascending: 0, .1, .125, .25, 1/3, 1/3, .5, .5, 2/3, 4.5 → median (1/3 + 1/3) / 2 = 1/3.
# ratios ascending: .2, 2/3, 2/3, .889, 1, 1.111, 1.333, 1.5, 1.5, 3
#   20th percentile: rank 0.2 * 9 = 1.8 → 2/3 + 0.8 * (2/3 - 2/3) = 2/3
#   80th percentile: rank 0.8 * 9 = 7.2 → 1.5 + 0.2 * (1.5 - 1.5) = 1.5
# An estimate of 30 min then reads "20m-45m" (30 min x 2/3 and x 1.5).


def given(
    i: int, estimated: float, started: float | None, *, tier: str = "medium", outcome: str = ""
) -> GivenEstimate:
    at = T0 + 1000.0 * i
    return GivenEstimate(
        key=f"wait:ml/Pod/p{i}@{at:.0f}",
        namespace="ml",
        workload=f"Pod/p{i}",
        tier=tier,
        waiting_since=at,
        given_at=at,
        estimated_start=at + estimated,
        started=at + started if started is not None else None,
        outcome=outcome or (OUTCOME_STARTED if started is not None else OUTCOME_WAITING),
    )


def known() -> list[GivenEstimate]:
    return [given(i, e, s) for i, (e, s) in enumerate(KNOWN)]


def test_each_error_of_the_known_history_is_as_worked_out_by_hand() -> None:
    errs = errors_of(known())
    assert [e.signed for e in errs] == [0, -300, 200, -600, -2400, 270, -100, 100, 600, -600]
    assert [round(e.relative, 4) for e in errs] == [
        0,
        -0.3333,
        0.5,
        -0.3333,
        -0.6667,
        4.5,
        -0.1,
        0.125,
        0.5,
        -0.25,
    ]
    assert [round(e.ratio, 4) for e in errs] == [1, 1.5, 0.6667, 1.5, 3, 0.2, 1.1111, 0.8889, 0.6667, 1.3333]


def test_the_known_history_gives_n_the_share_within_the_median_and_the_range() -> None:
    # Waits still open and waits that went away are not checked: they change nothing.
    rows = [*known(), given(20, 600, None), given(21, 600, 100_000, outcome=OUTCOME_GONE)]
    a = accuracy(errors_of(rows))["medium"]
    assert (a.n, a.within, a.in_ten(), a.poor, a.verdict) == (10, 8, 8, False, "fair")
    assert a.median_abs_relative == pytest.approx(1 / 3)
    assert (a.ratio_low, a.ratio_high) == (pytest.approx(2 / 3), pytest.approx(1.5))
    assert a.range_of(1800) == (pytest.approx(1200), pytest.approx(2700))
    assert a.words == "estimates for this tier were within ±50 % for 8 in 10 workloads last week"
    assert a.report_line == "medium: 10 estimates checked, 80 % within ±50 %, median error 33 %"


def test_a_new_estimate_reads_with_its_range_and_the_tiers_record() -> None:
    a = accuracy(errors_of(known()))["medium"]
    e = StartEstimate(1, 1800.0, T0 + 1800, 12, "from 12 medium pods: median 40m", accuracy=a)
    assert e.range == (pytest.approx(1200), pytest.approx(2700))
    assert e.text == (
        "estimate: starts in 20m-45m (from 12 medium pods: median 40m); "
        "estimates for this tier were within ±50 % for 8 in 10 workloads last week"
    )


def test_when_too_few_are_within_half_the_estimate_says_so_instead_of_a_number() -> None:
    # 10 checked, 4 within (estimated 10 min each; starts at 10, 12, 14, 8 min within; 30, 40, 1, 0.5,
    # 60, 90 min outside: relative -2/3, -3/4, +9, +9 (30 s counts as 60), -5/6, -0.89).
    starts = [600, 720, 840, 480, 1800, 2400, 60, 30, 3600, 5400]
    a = accuracy(errors_of([given(i, 600, s, tier="low") for i, s in enumerate(starts)]))["low"]
    assert (a.n, a.within, a.poor) == (10, 4, True)
    e = StartEstimate(1, 600.0, T0 + 600, 8, "from 8 low pods", accuracy=a)
    assert e.range is None
    assert e.text == (
        "no estimate: estimates for this tier were poor last week: within ±50 % for only 4 of 10 workloads"
    )
    assert a.report_line.endswith("(poor)")


def test_too_few_checked_is_poor_too_and_says_how_many() -> None:
    a = accuracy(errors_of(known()[:4]))["medium"]  # 4 checked, all within
    assert (a.n, a.within, a.poor) == (4, 4, True)
    e = StartEstimate(1, 600.0, T0 + 600, 8, "b", accuracy=a)
    assert e.text == (
        "no estimate: estimates for this tier are not shown: only 4 checked last week "
        "(at least 10 needed to tell how good they are)"
    )


def test_without_any_checked_estimate_the_estimate_reads_as_before() -> None:
    e = StartEstimate(1, 540.0, T0 + 540, 5, "from 5 medium pods: median 14m")
    assert e.range is None and e.text == "estimate: starts in about 9m (from 5 medium pods: median 14m)"


class Book:
    """A state, its evaluator and the estimate book carried from tick to tick, with waits history."""

    def __init__(self) -> None:
        self.state = ClusterState()
        self.evaluator = QueueEvaluator(POLICY)
        self.history = ScheduleHistory(window=6 * 3600, min_samples=3)
        for i, w in enumerate((300.0, 600.0, 900.0)):  # low tier's recent waits: median 10 min
            self.history.record("low", at=T0 - 600 + i, wait=w)
        self.book = EstimateBook()

    def tick(self, at: float) -> tuple[tuple[GivenEstimate, ...], tuple[GivenEstimate, ...]]:
        snap = self.evaluator.evaluate(self.state, now=at)
        t = Tick(at, snap, waits=self.history.waits(at))
        self.book, given_, ended = record_estimates(
            t, self.book, present=lambda k: k in self.state.by_workload
        )
        return given_, ended


def test_the_first_estimate_of_a_wait_is_remembered_once_and_checked_when_it_starts() -> None:
    b = Book()
    apply(b.state, pending_pod("a", created=T0))
    apply(b.state, pending_pod("gone", created=T0))
    g, ended = b.tick(T0 + 10)
    # Waited 10 s; the recent low waits longer than that are 5, 10, 15 min: median 10 min → starts at T0 + 600.
    assert {x.workload: (x.given_at, x.estimated_start) for x in g} == {
        "Pod/a": (T0 + 10, T0 + 600),
        "Pod/gone": (T0 + 10, T0 + 600),
    }
    assert ended == ()
    assert b.tick(T0 + 20) == ((), ())  # remembered: not given again
    apply(b.state, running_pod("a", "gpu-1"))
    apply(b.state, pending_pod("gone", created=T0), deleted=True)
    g, ended = b.tick(T0 + 900)
    out = {x.workload: (x.outcome, x.started) for x in ended}
    assert out == {"Pod/a": (OUTCOME_STARTED, T0 + 900), "Pod/gone": (OUTCOME_GONE, None)}
    (err,) = errors_of(ended)
    # Estimated T0 + 600, started T0 + 900: signed -300 s; the wait from the estimate 890 s → relative -0.337.
    assert err.signed == -300 and err.relative == pytest.approx(-300 / 890)


def test_after_a_restart_the_stores_open_estimates_are_checked_at_the_first_tick() -> None:
    b = Book()
    apply(b.state, running_pod("r", "gpu-1"))
    open_row = GivenEstimate("wait:vision/Pod/r@1", "vision", "Pod/r", "low", T0, T0 + 5, T0 + 600)
    b.book = book_from_store([open_row, given(1, 10, 20)])  # the started row is not reopened
    assert set(b.book.open) == {("vision", "Pod", "r")}
    _, ended = b.tick(T0 + 700)
    assert [(x.key, x.outcome, x.started) for x in ended] == [
        ("wait:vision/Pod/r@1", OUTCOME_STARTED, T0 + 700)
    ]


def test_a_wait_without_a_number_is_asked_again_later_and_its_first_number_is_remembered() -> None:
    b = Book()
    b.history = ScheduleHistory(window=6 * 3600, min_samples=3)  # no low waits yet: no number
    apply(b.state, pending_pod("late", created=T0))
    assert b.tick(T0 + 10) == ((), ())
    for i, w in enumerate((1200.0, 1800.0, 2400.0)):  # then three low pods are scheduled
        b.history.record("low", at=T0 + 20 + i, wait=w)
    assert b.tick(T0 + 60) == ((), ())  # not asked again before RETRY_EVERY (15 min)
    g, _ = b.tick(T0 + 10 + RETRY_EVERY)
    # Waited 910 s; the longer recent waits 20, 30, 40 min: median 30 min → starts at T0 + 1800.
    assert [(x.workload, x.given_at, x.estimated_start) for x in g] == [("Pod/late", T0 + 910, T0 + 1800)]


def test_the_number_recorded_is_the_one_the_estimate_shows() -> None:
    b = Book()
    for i in range(4):
        apply(b.state, pending_pod(f"w{i}", created=T0 - 200 * i))
    snap = b.evaluator.evaluate(b.state, now=T0 + 10)
    waits = b.history.waits(T0 + 10)
    shown = {w.name: e.at for w in snap.workloads if (e := waits.estimate(w)) is not None}
    assert shown and {w.name: waits.start_at(w.facts) for w in snap.workloads} == shown
