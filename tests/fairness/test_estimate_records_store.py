"""The start estimates on each store (SQLite and a real PostgreSQL, `store_backend`): two replicas writing the
same wait at different ticks leave one row (the estimate given first, the earliest start), a replica a tick
behind does not reopen an ended wait, the week's checked estimates read back through the port, a restart
finds the waits still open, and pruning keeps the table bounded."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tests.fairness.history_stores import open_history
from tests.fixtures.stores import StoreBackend
from watchtower.domain.estimate_accuracy import GivenEstimate, accuracy, errors_of
from watchtower.ports import EstimateRecords

H = 3600.0


def est(name: str, since: float, **kw: Any) -> GivenEstimate:
    base = GivenEstimate(
        key=f"wait:nlp/Job/{name}@{since:.0f}",
        namespace="nlp",
        workload=f"Job/{name}",
        tier="high",
        waiting_since=since,
        given_at=since + 10,
        estimated_start=since + 10 + 600,
    )
    return replace(base, **kw)


def stores(backend: StoreBackend) -> tuple[EstimateRecords, EstimateRecords]:
    """Two histories on one database: two replicas (or one after a restart)."""
    a: Any = open_history(backend)
    b: Any = open_history(backend)
    return a, b


def test_two_replicas_writing_one_wait_leave_one_row_with_the_first_estimate(
    store_backend: StoreBackend,
) -> None:
    a, b = stores(store_backend)
    a.record_estimates([est("x", 0.0)])
    # The second replica gave its first estimate a tick later (a different figure): the first one stays.
    b.record_estimates([est("x", 0.0, given_at=15.0, estimated_start=700.0)])
    assert a.estimates_open() == [est("x", 0.0)]
    b.record_estimates(
        [est("x", 0.0, given_at=15.0, estimated_start=700.0, started=900.0, outcome="started")]
    )
    a.record_estimates([est("x", 0.0, started=895.0, outcome="started")])
    a.record_estimates([est("x", 0.0)])  # a replica a tick behind still sees it waiting: no reopening
    (got,) = b.estimates_started(0.0, H)
    assert got == est("x", 0.0, started=895.0, outcome="started")
    assert a.estimates_open() == []
    # Writing the same rows again (a restart) changes nothing.
    a.record_estimates([est("x", 0.0, started=895.0, outcome="started")])
    assert b.estimates_started(0.0, H) == [got]


def test_the_weeks_checked_estimates_read_back_and_make_the_figures(store_backend: StoreBackend) -> None:
    a, _ = stores(store_backend)
    a.record_estimates(
        [
            est("in", 0.0, started=610.0, outcome="started"),  # estimated 610, started 610: error 0
            est("late", 100.0, started=100 + 10 + 1200, outcome="started"),  # 600 estimated, 1200 actual
            est("gone", 200.0, outcome="gone"),
            est("waiting", 300.0),
            est("before", -2 * H, started=-H, outcome="started"),  # started before the window
        ]
    )
    rows = a.estimates_started(0.0, H)
    assert [r.workload for r in rows] == ["Job/in", "Job/late"]
    acc = accuracy(errors_of(rows))["high"]
    # in: relative 0; late: signed -600 over an actual 1200 → -0.5, within (the bound counts).
    assert (acc.n, acc.within, acc.median_abs_relative) == (2, 2, 0.25)
    assert [r.workload for r in a.estimates_open()] == ["Job/waiting"]


def test_pruning_removes_what_was_given_before_the_retention(store_backend: StoreBackend) -> None:
    a, _ = stores(store_backend)
    a.record_estimates(
        [est("old", 0.0, started=700.0, outcome="started"), est("new", 10 * H), est("stale", 1.0)]
    )
    assert a.prune_estimates(before=H) == 2
    assert [r.workload for r in a.estimates_open()] == ["Job/new"]
    assert a.estimates_started(0.0, 100 * H) == []
