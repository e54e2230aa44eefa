"""The fairness history's rows, statements and reads, shared by the SQLite and PostgreSQL histories: the
same upserts by key and the same rows back to domain objects on both; only the parameter marker, the
connection and its locking differ. The tables are the store's migration 4 (and 5: the preemptions' outcome)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from watchtower.domain.fairness.history import Incident, PreemptionRecord, WaitEpisode

EPISODE_COLS = (
    "key",
    "source",
    "namespace",
    "team",
    "tier",
    "workload",
    "gpus",
    "started",
    "ended",
    "outcome",
)
PREEMPTION_COLS = (
    "key",
    "at",
    "victim_namespace",
    "victim_team",
    "victim_tier",
    "victim_workload",
    "preemptor_namespace",
    "preemptor_team",
    "preemptor_tier",
    "preemptor_workload",
    "gpus",
    "gpu_hours_lost",
    "outcome",  # migration 5
    "outcome_reason",
)
INCIDENT_COLS = ("key", "kind", "namespace", "team", "tier", "workload", "gpus", "started", "ended")

# The statements are put together from the constant table and column names above, once, at import; every
# value is a bound parameter (hence the noqa on S608, which cannot tell).


def _upsert(table: str, cols: tuple[str, ...], mark: str, *, closing: bool) -> str:
    """Return the upsert of a row by key. `closing`: the new row is taken while the stored one is open, or
    when the new one closes it earlier; a stored closing is never reopened (a replica a tick behind)."""
    sets = ", ".join(f"{c} = excluded.{c}" for c in cols if c != "key")
    sql = (
        f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join([mark] * len(cols))}) "  # noqa: S608
        f"ON CONFLICT (key) DO UPDATE SET {sets}"
    )
    if closing:
        sql += (
            f" WHERE {table}.ended IS NULL OR (excluded.ended IS NOT NULL AND excluded.ended < {table}.ended)"
        )
    return sql


def _select(table: str, cols: tuple[str, ...], where: str) -> str:
    return f"SELECT {', '.join(cols)} FROM {table} WHERE {where}"  # noqa: S608


@dataclass(frozen=True, slots=True)
class Statements:
    upsert_episode: str
    upsert_incident: str
    upsert_preemption: str
    heartbeat: str
    episodes: str  # (end, start)
    incidents: str  # (end, start)
    preemptions: str  # (start, end)
    open_episodes: str
    open_incidents: str
    coverage: str  # (start, end)
    prune: tuple[str, ...]  # each (before,)


def statements(mark: str) -> Statements:
    """Return the history's statements with `mark` as the parameter marker (`?` or `%s`)."""
    overlapping = f"started < {mark} AND (ended IS NULL OR ended >= {mark}) ORDER BY started, key"
    return Statements(
        upsert_episode=_upsert("fairness_episodes", EPISODE_COLS, mark, closing=True),
        upsert_incident=_upsert("fairness_incidents", INCIDENT_COLS, mark, closing=True),
        upsert_preemption=_upsert("fairness_preemptions", PREEMPTION_COLS, mark, closing=False),
        heartbeat=f"INSERT INTO fairness_heartbeats (minute) VALUES ({mark}) ON CONFLICT (minute) DO NOTHING",  # noqa: S608
        episodes=_select("fairness_episodes", EPISODE_COLS, overlapping),
        incidents=_select("fairness_incidents", INCIDENT_COLS, overlapping),
        preemptions=_select(
            "fairness_preemptions", PREEMPTION_COLS, f"at >= {mark} AND at < {mark} ORDER BY at, key"
        ),
        open_episodes=_select("fairness_episodes", EPISODE_COLS, "ended IS NULL"),
        open_incidents=_select("fairness_incidents", INCIDENT_COLS, "ended IS NULL"),
        coverage=f"SELECT COUNT(*) FROM fairness_heartbeats WHERE minute >= {mark} AND minute < {mark}",  # noqa: S608
        prune=(
            f"DELETE FROM fairness_episodes WHERE ended IS NOT NULL AND ended < {mark}",  # noqa: S608
            f"DELETE FROM fairness_incidents WHERE ended IS NOT NULL AND ended < {mark}",  # noqa: S608
            f"DELETE FROM fairness_preemptions WHERE at < {mark}",  # noqa: S608
            f"DELETE FROM fairness_heartbeats WHERE minute < {mark}",  # noqa: S608
        ),
    )


@dataclass(frozen=True, slots=True)
class Rows:
    episodes: list[tuple[Any, ...]]
    preemptions: list[tuple[Any, ...]]
    incidents: list[tuple[Any, ...]]
    heartbeats: list[tuple[float]]

    def __bool__(self) -> bool:
        return bool(self.episodes or self.preemptions or self.incidents or self.heartbeats)


def rows(
    episodes: Iterable[WaitEpisode],
    preemptions: Iterable[PreemptionRecord],
    incidents: Iterable[Incident],
    heartbeats: Iterable[float],
) -> Rows:
    return Rows(
        episodes=[tuple(getattr(e, c) for c in EPISODE_COLS) for e in episodes],
        preemptions=[tuple(getattr(p, c) for c in PREEMPTION_COLS) for p in preemptions],
        incidents=[tuple(getattr(i, c) for c in INCIDENT_COLS) for i in incidents],
        heartbeats=[(float(m),) for m in heartbeats],
    )


def coverage_hours(minutes: int, start: float, end: float) -> float:
    """Return the hours recorded in [start, end) from the count of its heartbeat minutes."""
    return min(float(minutes) / 60.0, max(0.0, (end - start) / 3600.0))


class SqlHistory:
    """What the two histories do alike: record, read back, cover, prune. A subclass gives its `_sql`, a
    `_tx()` that yields a DB-API connection inside one transaction, and `_rows()` for reads (SQLite reads
    under its lock outside a transaction; PostgreSQL in one)."""

    _sql: ClassVar[Statements]

    def _tx(self) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def _rows(self, sql: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def record(
        self,
        episodes: Iterable[WaitEpisode] = (),
        preemptions: Iterable[PreemptionRecord] = (),
        incidents: Iterable[Incident] = (),
        *,
        heartbeats: Iterable[float] = (),
    ) -> None:
        got = rows(episodes, preemptions, incidents, heartbeats)
        if not got:
            return
        with self._tx() as db:
            cur = db.cursor()
            for sql, batch in (
                (self._sql.upsert_episode, got.episodes),
                (self._sql.upsert_preemption, got.preemptions),
                (self._sql.upsert_incident, got.incidents),
                (self._sql.heartbeat, got.heartbeats),
            ):
                if batch:
                    cur.executemany(sql, batch)

    def episodes(self, start: float, end: float) -> list[WaitEpisode]:
        return [WaitEpisode(*r) for r in self._rows(self._sql.episodes, (end, start))]

    def preemptions(self, start: float, end: float) -> list[PreemptionRecord]:
        return [PreemptionRecord(*r) for r in self._rows(self._sql.preemptions, (start, end))]

    def incidents(self, start: float, end: float) -> list[Incident]:
        return [Incident(*r) for r in self._rows(self._sql.incidents, (end, start))]

    def open_waits(self) -> tuple[list[WaitEpisode], list[Incident]]:
        """Return the episodes and incidents still open, for a restarted recorder to start from."""
        eps = self._rows(self._sql.open_episodes)
        inc = self._rows(self._sql.open_incidents)
        return [WaitEpisode(*r) for r in eps], [Incident(*r) for r in inc]

    def history_coverage(self, start: float, end: float) -> float:
        ((n,),) = self._rows(self._sql.coverage, (start, end))
        return coverage_hours(int(n), start, end)

    def prune_history(self, before: float) -> int:
        with self._tx() as db:
            return sum(db.execute(sql, (before,)).rowcount for sql in self._sql.prune)
