"""The start estimates given (issue 33): one row per wait, its first estimate and, once known, its start,
with their upserts, reads and prune, shared by the SQLite and PostgreSQL histories like the fairness
history's (`rows`). The table is the store's migration 7.

Every write is an upsert by the wait's key that merges by rule, so replicas (or a restart) writing the same
wait at different ticks leave one row: the estimate given first is kept (the earliest `given_at`), the
earliest start, and an ended row keeps its outcome against a replica a tick behind that still sees it wait.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import astuple, dataclass
from typing import Any

from watchtower.domain.estimate_accuracy import GivenEstimate

from .rows import SqlHistory

COLS = (
    "key",
    "namespace",
    "workload",
    "tier",
    "waiting_since",
    "given_at",
    "estimated_start",
    "started",
    "outcome",
)
T = "start_estimates"

# As in rows.py: built once from constant names; every value is a bound parameter (the noqa on S608).


@dataclass(frozen=True, slots=True)
class EstimateStatements:
    upsert: str
    started: str  # (start, end): started in [start, end), outcome "started"
    open: str
    prune: str  # (before,)


def estimate_statements(mark: str) -> EstimateStatements:
    first = f"excluded.given_at < {T}.given_at"
    sets = [
        # The estimate given first wins, whichever replica wrote it first.
        f"{c} = CASE WHEN {first} THEN excluded.{c} ELSE {T}.{c} END"
        for c in ("given_at", "estimated_start")
    ]
    sets.append(
        f"started = CASE WHEN {T}.started IS NULL OR (excluded.started IS NOT NULL"
        f" AND excluded.started < {T}.started) THEN excluded.started ELSE {T}.started END"
    )
    # An ended wait stays ended (a replica a tick behind writes it waiting); of two endings, the one with
    # a start (seen by the replica that saw it run) beats "gone".
    sets.append(
        f"outcome = CASE WHEN {T}.outcome = 'waiting' OR (excluded.outcome = 'started'"
        f" AND {T}.outcome <> 'started') THEN excluded.outcome ELSE {T}.outcome END"
    )
    cols = ", ".join(COLS)
    return EstimateStatements(
        upsert=(
            f"INSERT INTO {T} ({cols}) VALUES ({', '.join([mark] * len(COLS))}) "  # noqa: S608
            f"ON CONFLICT (key) DO UPDATE SET {', '.join(sets)}"
        ),
        started=(
            f"SELECT {cols} FROM {T} WHERE started >= {mark} AND started < {mark}"  # noqa: S608
            " AND outcome = 'started' ORDER BY started, key"
        ),
        open=f"SELECT {cols} FROM {T} WHERE outcome = 'waiting'",  # noqa: S608
        prune=f"DELETE FROM {T} WHERE given_at < {mark}",  # noqa: S608
    )


class SqlEstimateHistory(SqlHistory):
    """The start estimates beside the fairness history (the port EstimateRecords): a subclass gives
    `_estimate_sql` as it gives `_sql`."""

    _estimate_sql: EstimateStatements

    def record_estimates(self, rows: Iterable[GivenEstimate]) -> None:
        got = [astuple(r) for r in rows]
        if not got:
            return
        with self._tx() as db:
            db.cursor().executemany(self._estimate_sql.upsert, got)

    def estimates_open(self) -> list[GivenEstimate]:
        """Return the estimates whose wait has not ended, for a restarted recorder to start from."""
        return [_row(r) for r in self._rows(self._estimate_sql.open)]

    def estimates_started(self, start: float, end: float) -> list[GivenEstimate]:
        """Return the estimates whose work started in [start, end), by start."""
        return [_row(r) for r in self._rows(self._estimate_sql.started, (start, end))]

    def prune_estimates(self, before: float) -> int:
        """Remove the estimates given before `before`, open ones too: a wait longer than the retention is
        not checked, and the table stays bounded whatever is left open."""
        with self._tx() as db:
            return int(db.execute(self._estimate_sql.prune, (before,)).rowcount)


def _row(r: Sequence[Any]) -> GivenEstimate:
    return GivenEstimate(*r)
