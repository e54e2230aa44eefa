"""The state store's schema (alerts, the outbox, the fairness history, the replay records, the start
estimates) as numbered migrations, per database, and the rule that applies them.

A store records the last migration applied in `schema_version`. At start the ones after it are applied in
order, in one transaction with the version's update, so a crash mid-way leaves the old version whole. A
store written by a newer Watchtower (a version past the last one known here) is refused before anything
is written: running older code on it could drop what it does not know.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


class StoreVersionError(Exception):
    """The store's schema is newer than this Watchtower knows: the one line a user needs to act on."""


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    what: str  # why the step exists, for the log
    statements: tuple[str, ...]


SQLITE: tuple[Migration, ...] = (
    Migration(
        1,
        "alerts, silences, the notification log, the outbox, disabled integrations",
        (
            "CREATE TABLE IF NOT EXISTS alerts (fingerprint TEXT PRIMARY KEY, body BLOB NOT NULL)",
            "CREATE TABLE IF NOT EXISTS silences (id TEXT PRIMARY KEY, body BLOB NOT NULL, ends_at REAL NOT NULL)",
            "CREATE TABLE IF NOT EXISTS nflog (integration TEXT NOT NULL, group_key TEXT NOT NULL,"
            " firing BLOB NOT NULL, resolved BLOB NOT NULL, at REAL NOT NULL,"
            " PRIMARY KEY (integration, group_key))",
            "CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE,"
            " integration TEXT NOT NULL, group_key TEXT NOT NULL, payload BLOB NOT NULL, created REAL NOT NULL,"
            " attempts INTEGER NOT NULL DEFAULT 0, next_attempt REAL NOT NULL, status TEXT NOT NULL,"
            " last_error TEXT NOT NULL DEFAULT '', delivered_at REAL)",
            "CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (status, integration, id)",
            "CREATE TABLE IF NOT EXISTS disabled_integrations (integration TEXT PRIMARY KEY, reason TEXT, at REAL)",
        ),
    ),
    Migration(
        2,
        "disabled integrations remember a digest of their configuration (enabled again when it changes)",
        ("ALTER TABLE disabled_integrations ADD COLUMN config TEXT NOT NULL DEFAULT ''",),
    ),
    Migration(
        3,
        "keys of messages sent once ever (the weekly report: once per ISO week per recipient)",
        ("CREATE TABLE IF NOT EXISTS sent_once (key TEXT PRIMARY KEY, at REAL NOT NULL)",),
    ),
    Migration(
        4,
        "the fairness report's history: wait episodes, preemptions, incidents, the recorder's heartbeat minutes",
        (
            "CREATE TABLE IF NOT EXISTS fairness_episodes (key TEXT PRIMARY KEY, source TEXT NOT NULL,"
            " namespace TEXT NOT NULL, team TEXT NOT NULL, tier TEXT NOT NULL, workload TEXT NOT NULL,"
            " gpus INTEGER NOT NULL, started REAL NOT NULL, ended REAL, outcome TEXT NOT NULL)",
            "CREATE INDEX IF NOT EXISTS fairness_episodes_started ON fairness_episodes (started)",
            "CREATE INDEX IF NOT EXISTS fairness_episodes_ended ON fairness_episodes (ended)",
            "CREATE TABLE IF NOT EXISTS fairness_preemptions (key TEXT PRIMARY KEY, at REAL NOT NULL,"
            " victim_namespace TEXT NOT NULL, victim_team TEXT NOT NULL, victim_tier TEXT NOT NULL,"
            " victim_workload TEXT NOT NULL, preemptor_namespace TEXT NOT NULL, preemptor_team TEXT NOT NULL,"
            " preemptor_tier TEXT NOT NULL, preemptor_workload TEXT NOT NULL, gpus INTEGER NOT NULL,"
            " gpu_hours_lost REAL)",
            "CREATE INDEX IF NOT EXISTS fairness_preemptions_at ON fairness_preemptions (at)",
            "CREATE TABLE IF NOT EXISTS fairness_incidents (key TEXT PRIMARY KEY, kind TEXT NOT NULL,"
            " namespace TEXT NOT NULL, team TEXT NOT NULL, tier TEXT NOT NULL, workload TEXT NOT NULL,"
            " gpus INTEGER NOT NULL, started REAL NOT NULL, ended REAL)",
            "CREATE INDEX IF NOT EXISTS fairness_incidents_started ON fairness_incidents (started)",
            "CREATE TABLE IF NOT EXISTS fairness_heartbeats (minute REAL PRIMARY KEY)",
        ),
    ),
    Migration(
        5,
        "the fairness history's preemptions record what they came to (helped, or did not help and why)",
        (
            "ALTER TABLE fairness_preemptions ADD COLUMN outcome TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE fairness_preemptions ADD COLUMN outcome_reason TEXT NOT NULL DEFAULT ''",
        ),
    ),
    Migration(
        6,
        "the replay records: each GPU workload's arrival, shape, start, preemption and end, and the nodes seen",
        (
            "CREATE TABLE IF NOT EXISTS replay_workloads (key TEXT PRIMARY KEY, namespace TEXT NOT NULL,"
            " kind TEXT NOT NULL, name TEXT NOT NULL, team TEXT NOT NULL, tier TEXT NOT NULL,"
            " priority INTEGER NOT NULL, form TEXT NOT NULL, pods INTEGER NOT NULL, gpus_per_pod INTEGER NOT NULL,"
            " cpu_millis_per_pod INTEGER, memory_bytes_per_pod INTEGER, gang_min INTEGER, arrived REAL NOT NULL,"
            " started REAL, preempted REAL, ended REAL, outcome TEXT NOT NULL)",
            "CREATE INDEX IF NOT EXISTS replay_workloads_arrived ON replay_workloads (arrived)",
            "CREATE INDEX IF NOT EXISTS replay_workloads_ended ON replay_workloads (ended)",
            "CREATE TABLE IF NOT EXISTS replay_nodes (name TEXT PRIMARY KEY, gpus INTEGER NOT NULL,"
            " cpu_millis INTEGER NOT NULL, memory_bytes INTEGER NOT NULL, first_seen REAL NOT NULL,"
            " last_seen REAL NOT NULL)",
        ),
    ),
    Migration(
        7,
        "the start estimates given: each wait's first estimate and, once known, when the work started",
        (
            "CREATE TABLE IF NOT EXISTS start_estimates (key TEXT PRIMARY KEY, namespace TEXT NOT NULL,"
            " workload TEXT NOT NULL, tier TEXT NOT NULL, waiting_since REAL NOT NULL, given_at REAL NOT NULL,"
            " estimated_start REAL NOT NULL, started REAL, outcome TEXT NOT NULL)",
            "CREATE INDEX IF NOT EXISTS start_estimates_started ON start_estimates (started)",
            "CREATE INDEX IF NOT EXISTS start_estimates_given ON start_estimates (given_at)",
        ),
    ),
)

POSTGRES: tuple[Migration, ...] = (
    Migration(
        1,
        "alerts, silences, the notification log, the outbox, disabled integrations",
        (
            "CREATE TABLE alerts (fingerprint TEXT PRIMARY KEY, body BYTEA NOT NULL)",
            "CREATE TABLE silences (id TEXT PRIMARY KEY, body BYTEA NOT NULL, ends_at DOUBLE PRECISION NOT NULL)",
            "CREATE TABLE nflog (integration TEXT NOT NULL, group_key TEXT NOT NULL, firing BYTEA NOT NULL,"
            " resolved BYTEA NOT NULL, at DOUBLE PRECISION NOT NULL, PRIMARY KEY (integration, group_key))",
            "CREATE TABLE outbox (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, key TEXT NOT NULL UNIQUE,"
            " integration TEXT NOT NULL, group_key TEXT NOT NULL, payload BYTEA NOT NULL,"
            " created DOUBLE PRECISION NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,"
            " next_attempt DOUBLE PRECISION NOT NULL, status TEXT NOT NULL, last_error TEXT NOT NULL DEFAULT '',"
            " delivered_at DOUBLE PRECISION)",
            "CREATE INDEX outbox_pending ON outbox (status, integration, id)",
            "CREATE TABLE disabled_integrations (integration TEXT PRIMARY KEY, reason TEXT,"
            " at DOUBLE PRECISION, config TEXT NOT NULL DEFAULT '')",
        ),
    ),
    Migration(
        2,
        "outbox claims: replicas sharing the store never hand one message to two senders",
        (
            # The claimer is a database session (its backend pid and start), so a claim of a process that
            # died is void at once, and one of a process cut off from the database lapses at claimed_until.
            "ALTER TABLE outbox ADD COLUMN claim_pid INTEGER",
            "ALTER TABLE outbox ADD COLUMN claim_started TIMESTAMPTZ",
            "ALTER TABLE outbox ADD COLUMN claimed_until DOUBLE PRECISION",
        ),
    ),
    Migration(
        3,
        "keys of messages sent once ever (the weekly report: once per ISO week per recipient)",
        ("CREATE TABLE sent_once (key TEXT PRIMARY KEY, at DOUBLE PRECISION NOT NULL)",),
    ),
    Migration(
        4,
        "the fairness report's history: wait episodes, preemptions, incidents, the recorder's heartbeat minutes",
        (
            "CREATE TABLE fairness_episodes (key TEXT PRIMARY KEY, source TEXT NOT NULL,"
            " namespace TEXT NOT NULL, team TEXT NOT NULL, tier TEXT NOT NULL, workload TEXT NOT NULL,"
            " gpus INTEGER NOT NULL, started DOUBLE PRECISION NOT NULL, ended DOUBLE PRECISION, outcome TEXT NOT NULL)",
            "CREATE INDEX fairness_episodes_started ON fairness_episodes (started)",
            "CREATE INDEX fairness_episodes_ended ON fairness_episodes (ended)",
            "CREATE TABLE fairness_preemptions (key TEXT PRIMARY KEY, at DOUBLE PRECISION NOT NULL,"
            " victim_namespace TEXT NOT NULL, victim_team TEXT NOT NULL, victim_tier TEXT NOT NULL,"
            " victim_workload TEXT NOT NULL, preemptor_namespace TEXT NOT NULL, preemptor_team TEXT NOT NULL,"
            " preemptor_tier TEXT NOT NULL, preemptor_workload TEXT NOT NULL, gpus INTEGER NOT NULL,"
            " gpu_hours_lost DOUBLE PRECISION)",
            "CREATE INDEX fairness_preemptions_at ON fairness_preemptions (at)",
            "CREATE TABLE fairness_incidents (key TEXT PRIMARY KEY, kind TEXT NOT NULL,"
            " namespace TEXT NOT NULL, team TEXT NOT NULL, tier TEXT NOT NULL, workload TEXT NOT NULL,"
            " gpus INTEGER NOT NULL, started DOUBLE PRECISION NOT NULL, ended DOUBLE PRECISION)",
            "CREATE INDEX fairness_incidents_started ON fairness_incidents (started)",
            "CREATE TABLE fairness_heartbeats (minute DOUBLE PRECISION PRIMARY KEY)",
        ),
    ),
    Migration(
        5,
        "the fairness history's preemptions record what they came to (helped, or did not help and why)",
        (
            "ALTER TABLE fairness_preemptions ADD COLUMN outcome TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE fairness_preemptions ADD COLUMN outcome_reason TEXT NOT NULL DEFAULT ''",
        ),
    ),
    Migration(
        6,
        "the replay records: each GPU workload's arrival, shape, start, preemption and end, and the nodes seen",
        (
            "CREATE TABLE replay_workloads (key TEXT PRIMARY KEY, namespace TEXT NOT NULL,"
            " kind TEXT NOT NULL, name TEXT NOT NULL, team TEXT NOT NULL, tier TEXT NOT NULL,"
            " priority BIGINT NOT NULL, form TEXT NOT NULL, pods INTEGER NOT NULL, gpus_per_pod INTEGER NOT NULL,"
            " cpu_millis_per_pod BIGINT, memory_bytes_per_pod BIGINT, gang_min INTEGER,"
            " arrived DOUBLE PRECISION NOT NULL, started DOUBLE PRECISION, preempted DOUBLE PRECISION,"
            " ended DOUBLE PRECISION, outcome TEXT NOT NULL)",
            "CREATE INDEX replay_workloads_arrived ON replay_workloads (arrived)",
            "CREATE INDEX replay_workloads_ended ON replay_workloads (ended)",
            "CREATE TABLE replay_nodes (name TEXT PRIMARY KEY, gpus INTEGER NOT NULL,"
            " cpu_millis BIGINT NOT NULL, memory_bytes BIGINT NOT NULL, first_seen DOUBLE PRECISION NOT NULL,"
            " last_seen DOUBLE PRECISION NOT NULL)",
        ),
    ),
    Migration(
        7,
        "the start estimates given: each wait's first estimate and, once known, when the work started",
        (
            "CREATE TABLE start_estimates (key TEXT PRIMARY KEY, namespace TEXT NOT NULL,"
            " workload TEXT NOT NULL, tier TEXT NOT NULL, waiting_since DOUBLE PRECISION NOT NULL,"
            " given_at DOUBLE PRECISION NOT NULL, estimated_start DOUBLE PRECISION NOT NULL,"
            " started DOUBLE PRECISION, outcome TEXT NOT NULL)",
            "CREATE INDEX start_estimates_started ON start_estimates (started)",
            "CREATE INDEX start_estimates_given ON start_estimates (given_at)",
        ),
    ),
)


def latest(migrations: Sequence[Migration]) -> int:
    return migrations[-1].version if migrations else 0


def check_numbering(migrations: Sequence[Migration]) -> None:
    """Raise ValueError unless the migrations are numbered 1, 2, 3, ... (a gap would skip a step)."""
    got = [m.version for m in migrations]
    if got != list(range(1, len(got) + 1)):
        raise ValueError(f"migrations must be numbered 1..n in order, got {got}")


def to_apply(current: int, migrations: Sequence[Migration], *, where: str) -> list[Migration]:
    """Return the migrations after `current`; raise StoreVersionError if the store is newer than them."""
    check_numbering(migrations)
    known = latest(migrations)
    if current > known:
        raise StoreVersionError(
            f"the alert store {where} is at schema version {current}, but this Watchtower knows versions up"
            f" to {known}: run the Watchtower that wrote it (or a newer one), or point store.url at another"
            " database; nothing was changed"
        )
    return [m for m in migrations if m.version > current]


def apply(
    current: int,
    migrations: Sequence[Migration],
    *,
    where: str,
    execute: Callable[[str], object],
    log: Callable[[str], object],
) -> int:
    """Run the statements of each migration after `current` through `execute` (inside the caller's
    transaction) and return the version reached; the caller records it in the same transaction."""
    version = current
    for m in to_apply(current, migrations, where=where):
        for sql in m.statements:
            execute(sql)
        version = m.version
        log(f"alert store {where}: migrated to schema version {m.version} ({m.what})")
    return version


def migrate_sqlite(db: Any, *, where: str, log: Callable[[str], object]) -> int:
    """Bring a SQLite store to the latest schema inside the caller's transaction (`db` a connection in
    one) and return its version. The alert store and the fairness history, which share the file, both
    call it at open, so either may be the first to open a new file."""
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "schema_version" in tables:
        current = db.execute("SELECT version FROM schema_version").fetchone()[0]
    elif "alerts" in tables:
        # Written before the store recorded its version: what its tables hold tells which it is.
        cols = {r[1] for r in db.execute("PRAGMA table_info(disabled_integrations)")}
        current = 2 if "config" in cols else 1
    else:
        # A file of the fairness history alone (written before migration 4) is version 0 too: migration
        # 4's statements take its tables as they are.
        current = 0
    version = apply(current, SQLITE, where=where, execute=db.execute, log=log)
    if "schema_version" not in tables:
        db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        db.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
    elif version != current:
        db.execute("UPDATE schema_version SET version = ?", (version,))
    return version
