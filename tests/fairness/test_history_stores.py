"""The fairness history's contract on each store (SQLite and a real PostgreSQL, `store_backend`): records
are upserts by key, a closed record is never reopened and of two closings the earlier is kept, the
queries see what overlaps the week, and the tables are migration 4 of the store's schema."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import UTC
from pathlib import Path

from tests.fairness.history_stores import everything, open_history
from tests.fixtures.stores import StoreBackend
from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.adapters.store.migrations import POSTGRES, SQLITE, latest
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.domain.fairness.history import Incident, PreemptionRecord, WaitEpisode


def ep(key: str, started: float, ended: float | None, outcome: str = "scheduled") -> WaitEpisode:
    return WaitEpisode(key, "pod", "nlp", "language", "high", f"Job/{key}", 4, started, ended, outcome)


def test_recording_the_same_facts_from_two_replicas_leaves_one_row_each(store_backend: StoreBackend) -> None:
    a, b = open_history(store_backend), open_history(store_backend)
    pre = PreemptionRecord("preempt:u1", 150.0, "v", "vision", "low", "Job/v", "nlp", "language", "high",
                           "Pod/p", 4, 2.5)  # fmt: skip
    inc = Incident("starve:x", "starvation", "nlp", "language", "high", "Job/x", 4, 160.0, None)
    for h in (a, b, a):
        h.record([ep("x", 100.0, None, "waiting")], [pre], [inc], heartbeats=[60.0, 120.0])
    eps, pres, incs, hours, (open_eps, open_incs) = everything(b)
    assert [e.key for e in eps] == ["x"] and pres == [pre] and incs == [inc]
    assert hours == 2 / 60
    assert [e.key for e in open_eps] == ["x"] and open_incs == [inc]
    a.close()
    b.close()


def test_a_closed_wait_is_never_reopened_and_the_earlier_closing_wins(store_backend: StoreBackend) -> None:
    h, behind = open_history(store_backend), open_history(store_backend)
    h.record([ep("x", 100.0, None, "waiting")])
    h.record([ep("x", 100.0, 400.0)])
    behind.record([ep("x", 100.0, None, "waiting")])  # a replica a tick behind
    assert [(e.ended, e.outcome) for e in h.episodes(0, 1e9)] == [(400.0, "scheduled")]
    behind.record([ep("x", 100.0, 300.0)])  # it saw the placement earlier
    h.record([ep("x", 100.0, 500.0)])
    assert [e.ended for e in h.episodes(0, 1e9)] == [300.0]
    assert h.open_waits() == ([], [])
    h.close()
    behind.close()


def test_the_week_sees_what_overlaps_it_and_pruning_keeps_what_is_open(store_backend: StoreBackend) -> None:
    h = open_history(store_backend)
    h.record(
        [ep("before", 0.0, 50.0), ep("across", 50.0, 150.0), ep("open", 90.0, None, "waiting"), ep("after", 200.0, 250.0)],
        [PreemptionRecord("p:in", 120.0, "v", "vision", "low", "Job/v", "nlp", "language", "high", "Pod/p", 1, None)],
        heartbeats=[60.0 * m for m in range(10)],
    )  # fmt: skip
    assert [e.key for e in h.episodes(100.0, 200.0)] == ["across", "open"]
    assert [p.key for p in h.preemptions(100.0, 200.0)] == ["p:in"]
    assert h.preemptions(100.0, 200.0)[0].gpu_hours_lost is None  # missing stays missing, never 0
    assert h.history_coverage(0.0, 300.0) == 5 / 60
    assert h.prune_history(before=160.0) == 2 + 1 + 3  # before, across; the preemption; 3 heartbeats
    assert [e.key for e in h.episodes(0, 1e9)] == ["open", "after"]
    h.close()


def test_the_history_is_migration_4_of_either_store() -> None:
    assert (
        latest(SQLITE) == latest(POSTGRES) == 7
    )  # 5: the preemptions' outcome (issue 30); 6: replay records (issue 31); 7: start estimates (issue 33)
    for migrations in (SQLITE, POSTGRES):
        assert any("fairness_episodes" in s for s in migrations[3].statements)


def test_a_store_at_version_3_gains_the_history_at_open(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    con = sqlite3.connect(db)
    for m in SQLITE[:3]:
        for stmt in m.statements:
            con.execute(stmt)
    con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    con.execute("INSERT INTO schema_version VALUES (3)")
    con.commit()
    con.close()
    h = SQLiteFairnessHistory(db)  # the history opened first (alerting off): it migrates the file
    assert h.schema_version == latest(SQLITE)
    h.record([ep("x", 1.0, None, "waiting")])
    h.close()
    store = SQLiteAlertStore(db)
    assert store.schema_version == latest(SQLITE)
    store.close()


def test_a_history_file_written_before_migrations_is_taken_as_it_is(tmp_path: Path) -> None:
    """A file g6's history wrote alone (its tables, no schema_version): migration 4 keeps its rows."""
    db = tmp_path / "state.db"
    con = sqlite3.connect(db)
    for stmt in SQLITE[3].statements:
        con.execute(stmt)
    con.execute(
        "INSERT INTO fairness_episodes VALUES ('wait:x', 'pod', 'nlp', 'language', 'high', 'Job/x', 4, 1.0,"
        " NULL, 'waiting')"
    )
    con.commit()
    con.close()
    store = SQLiteAlertStore(db)
    assert store.schema_version == latest(SQLITE)
    store.close()
    h = SQLiteFairnessHistory(db)
    assert [e.key for e in h.episodes(0, 10)] == ["wait:x"]
    h.close()


async def test_the_service_and_the_cli_find_the_history_in_the_configured_store(
    store_backend: StoreBackend,
) -> None:
    """`store.url` names the database: the service records into it beside the alert store (on PostgreSQL
    over the store's own connection) and `watchtower report fairness` reads the report back from it."""
    from watchtower.bootstrap import open_alert_store, open_history
    from watchtower.commands.report import report_source_for
    from watchtower.config import settings_from_mapping
    from watchtower.domain.fairness.week import IsoWeek

    settings = settings_from_mapping({"store": {"url": store_backend.spec}}, env={})
    week = IsoWeek.parse("2026-W47")
    start, _ = week.bounds(UTC)
    store = open_alert_store(settings)
    assert store is not None
    history = open_history(settings, store)
    assert history is not None
    history.record([ep("x", start + 60, start + 660)], heartbeats=[start + 60])
    history.close()
    store.close()
    source = report_source_for(settings)
    assert source is not None
    report = await source(week, None)
    (lang,) = report.teams
    assert (lang.team, [w.finished for w in lang.waits]) == ("language", [1])


def test_a_store_at_version_4_gains_the_preemptions_outcome_and_its_old_rows_read_undecided(
    tmp_path: Path,
) -> None:
    """Migration 5: a week recorded before outcomes were judged keeps its preemptions, each with no outcome."""
    db = tmp_path / "state.db"
    con = sqlite3.connect(db)
    for m in SQLITE[:4]:
        for stmt in m.statements:
            con.execute(stmt)
    con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    con.execute("INSERT INTO schema_version VALUES (4)")
    con.execute(
        "INSERT INTO fairness_preemptions VALUES ('preempt:old', 150.0, 'vision', 'vision', 'low', 'Job/a',"
        " 'nlp', 'nlp', 'high', 'Pod/b', 4, 2.0)"
    )
    con.commit()
    con.close()
    h = SQLiteFairnessHistory(db)
    assert h.schema_version == latest(SQLITE)
    [old] = h.preemptions(100.0, 200.0)
    assert (old.key, old.outcome, old.outcome_reason) == ("preempt:old", "", "")
    h.record(preemptions=[replace(old, outcome="did_not_help", outcome_reason="started_elsewhere")])
    [again] = h.preemptions(100.0, 200.0)
    assert (again.outcome, again.outcome_reason) == ("did_not_help", "started_elsewhere")
    h.close()
