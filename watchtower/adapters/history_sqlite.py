"""The fairness history in SQLite: wait episodes, preemptions, incidents and the heartbeat minutes, in the
same database file as the alert store (its own connection; WAL lets the two write in turn).

Every write is an upsert by the record's key, so recording the same tick twice, from a restarted process or
from a second replica, leaves the same rows. A closed record stays closed: a later write of it still open
(a replica a tick behind) changes nothing, and of two closings the earlier one is kept.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from watchtower.domain.fairness.history import Incident, PreemptionRecord, WaitEpisode

# The schema as one list of statements, so that it folds into the store's migrations as one step.
HISTORY_DDL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS fairness_episodes (
        key TEXT PRIMARY KEY, source TEXT NOT NULL, namespace TEXT NOT NULL, team TEXT NOT NULL,
        tier TEXT NOT NULL, workload TEXT NOT NULL, gpus INTEGER NOT NULL,
        started REAL NOT NULL, ended REAL, outcome TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS fairness_episodes_started ON fairness_episodes (started)",
    "CREATE INDEX IF NOT EXISTS fairness_episodes_ended ON fairness_episodes (ended)",
    """CREATE TABLE IF NOT EXISTS fairness_preemptions (
        key TEXT PRIMARY KEY, at REAL NOT NULL,
        victim_namespace TEXT NOT NULL, victim_team TEXT NOT NULL, victim_tier TEXT NOT NULL,
        victim_workload TEXT NOT NULL, preemptor_namespace TEXT NOT NULL, preemptor_team TEXT NOT NULL,
        preemptor_tier TEXT NOT NULL, preemptor_workload TEXT NOT NULL, gpus INTEGER NOT NULL,
        gpu_hours_lost REAL)""",
    "CREATE INDEX IF NOT EXISTS fairness_preemptions_at ON fairness_preemptions (at)",
    """CREATE TABLE IF NOT EXISTS fairness_incidents (
        key TEXT PRIMARY KEY, kind TEXT NOT NULL, namespace TEXT NOT NULL, team TEXT NOT NULL,
        tier TEXT NOT NULL, workload TEXT NOT NULL, gpus INTEGER NOT NULL, started REAL NOT NULL, ended REAL)""",
    "CREATE INDEX IF NOT EXISTS fairness_incidents_started ON fairness_incidents (started)",
    "CREATE TABLE IF NOT EXISTS fairness_heartbeats (minute REAL PRIMARY KEY)",
)

_EPISODE_COLS = (
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
_PREEMPTION_COLS = (
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
)
_INCIDENT_COLS = ("key", "kind", "namespace", "team", "tier", "workload", "gpus", "started", "ended")


# The statements are put together from the constant table and column names above, once, at import; every
# value is a bound parameter (hence the noqa on S608, which cannot tell).


def _upsert(table: str, cols: tuple[str, ...], *, closing: bool) -> str:
    """Return the upsert of a row by key. `closing`: the new row is taken while the stored one is open, or
    when the new one closes it earlier; a stored closing is never reopened."""
    sets = ", ".join(f"{c} = excluded.{c}" for c in cols if c != "key")
    sql = (
        f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "  # noqa: S608
        f"ON CONFLICT (key) DO UPDATE SET {sets}"
    )
    if closing:
        sql += (
            f" WHERE {table}.ended IS NULL OR (excluded.ended IS NOT NULL AND excluded.ended < {table}.ended)"
        )
    return sql


def _select(table: str, cols: tuple[str, ...], where: str) -> str:
    return f"SELECT {', '.join(cols)} FROM {table} WHERE {where}"  # noqa: S608


_UPSERT_EPISODE = _upsert("fairness_episodes", _EPISODE_COLS, closing=True)
_UPSERT_INCIDENT = _upsert("fairness_incidents", _INCIDENT_COLS, closing=True)
_UPSERT_PREEMPTION = _upsert("fairness_preemptions", _PREEMPTION_COLS, closing=False)
_OVERLAPPING = "started < ? AND (ended IS NULL OR ended >= ?) ORDER BY started, key"
_SELECT_EPISODES = _select("fairness_episodes", _EPISODE_COLS, _OVERLAPPING)
_SELECT_INCIDENTS = _select("fairness_incidents", _INCIDENT_COLS, _OVERLAPPING)
_SELECT_PREEMPTIONS = _select("fairness_preemptions", _PREEMPTION_COLS, "at >= ? AND at < ? ORDER BY at, key")
_OPEN_EPISODES = _select("fairness_episodes", _EPISODE_COLS, "ended IS NULL")
_OPEN_INCIDENTS = _select("fairness_incidents", _INCIDENT_COLS, "ended IS NULL")


class SQLiteFairnessHistory:
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA busy_timeout=5000")
        with self._tx() as db:
            for stmt in HISTORY_DDL:
                db.execute(stmt)

    def close(self) -> None:
        with self._lock:
            self.db.close()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def _rows(self, sql: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self.db.execute(sql, tuple(args)).fetchall()

    def record(
        self,
        episodes: Iterable[WaitEpisode] = (),
        preemptions: Iterable[PreemptionRecord] = (),
        incidents: Iterable[Incident] = (),
        *,
        heartbeats: Iterable[float] = (),
    ) -> None:
        eps = [tuple(getattr(e, c) for c in _EPISODE_COLS) for e in episodes]
        pre = [tuple(getattr(p, c) for c in _PREEMPTION_COLS) for p in preemptions]
        inc = [tuple(getattr(i, c) for c in _INCIDENT_COLS) for i in incidents]
        beats = [(float(m),) for m in heartbeats]
        if not (eps or pre or inc or beats):
            return
        with self._tx() as db:
            db.executemany(_UPSERT_EPISODE, eps)
            db.executemany(_UPSERT_PREEMPTION, pre)
            db.executemany(_UPSERT_INCIDENT, inc)
            db.executemany("INSERT OR IGNORE INTO fairness_heartbeats (minute) VALUES (?)", beats)

    def episodes(self, start: float, end: float) -> list[WaitEpisode]:
        rows = self._rows(_SELECT_EPISODES, (end, start))
        return [WaitEpisode(*r) for r in rows]

    def preemptions(self, start: float, end: float) -> list[PreemptionRecord]:
        rows = self._rows(_SELECT_PREEMPTIONS, (start, end))
        return [PreemptionRecord(*r) for r in rows]

    def incidents(self, start: float, end: float) -> list[Incident]:
        rows = self._rows(_SELECT_INCIDENTS, (end, start))
        return [Incident(*r) for r in rows]

    def open_waits(self) -> tuple[list[WaitEpisode], list[Incident]]:
        """Return the episodes and incidents still open, for a restarted recorder to start from."""
        eps = self._rows(_OPEN_EPISODES)
        inc = self._rows(_OPEN_INCIDENTS)
        return [WaitEpisode(*r) for r in eps], [Incident(*r) for r in inc]

    def history_coverage(self, start: float, end: float) -> float:
        ((n,),) = self._rows(
            "SELECT COUNT(*) FROM fairness_heartbeats WHERE minute >= ? AND minute < ?", (start, end)
        )
        return min(float(n) / 60.0, max(0.0, (end - start) / 3600.0))

    def prune_history(self, before: float) -> int:
        with self._tx() as db:
            n = 0
            for sql in (
                "DELETE FROM fairness_episodes WHERE ended IS NOT NULL AND ended < ?",
                "DELETE FROM fairness_incidents WHERE ended IS NOT NULL AND ended < ?",
                "DELETE FROM fairness_preemptions WHERE at < ?",
                "DELETE FROM fairness_heartbeats WHERE minute < ?",
            ):
                n += db.execute(sql, (before,)).rowcount
            return n
