"""The replay records (issue 31): the workload and node rows a replay of a recorded week reads, with their
upserts, reads and prune, shared by the SQLite and PostgreSQL histories like the fairness history's
(`rows`). The tables are the store's migration 5.

Every write is an upsert by key that merges by rule, so replicas (or a restart) writing the same facts at
different ticks leave the same row: the earliest start and end are kept, the latest preemption and
sighting, the most GPUs a node offered; an ended row keeps its outcome against a replica a tick behind.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import astuple, dataclass
from typing import Any

from watchtower.domain.replay_record import NodeRecord, WorkloadRecord
from watchtower.replay.policy import NodeSpec
from watchtower.replay.recorded import recorded_jobs, recorded_nodes
from watchtower.replay.trace import TraceJob

from .rows import SqlHistory

WORKLOAD_COLS = (
    "key",
    "namespace",
    "kind",
    "name",
    "team",
    "tier",
    "priority",
    "form",
    "pods",
    "gpus_per_pod",
    "cpu_millis_per_pod",
    "memory_bytes_per_pod",
    "gang_min",
    "arrived",
    "started",
    "preempted",
    "ended",
    "outcome",
)
NODE_COLS = ("name", "gpus", "cpu_millis", "memory_bytes", "first_seen", "last_seen")

# As in rows.py: built once from constant names; every value is a bound parameter (the noqa on S608).


def _earliest(table: str, c: str) -> str:
    return (
        f"{c} = CASE WHEN {table}.{c} IS NULL OR (excluded.{c} IS NOT NULL AND excluded.{c} < {table}.{c})"
        f" THEN excluded.{c} ELSE {table}.{c} END"
    )


def _latest(table: str, c: str) -> str:
    return (
        f"{c} = CASE WHEN {table}.{c} IS NULL OR (excluded.{c} IS NOT NULL AND excluded.{c} > {table}.{c})"
        f" THEN excluded.{c} ELSE {table}.{c} END"
    )


@dataclass(frozen=True, slots=True)
class ReplayStatements:
    upsert_workload: str
    upsert_node: str
    workloads: str  # (start, end): arrived in [start, end)
    nodes: str  # (end, start): seen in [start, end)
    open_workloads: str
    all_nodes: str
    last_seen: str
    prune: tuple[str, ...]  # each (before,)


def replay_statements(mark: str) -> ReplayStatements:
    w, n = "replay_workloads", "replay_nodes"
    keep = ("key", "arrived", "started", "preempted", "ended", "outcome")
    sets = [f"{c} = excluded.{c}" for c in WORKLOAD_COLS if c not in keep]
    sets += [_earliest(w, "started"), _latest(w, "preempted"), _earliest(w, "ended")]
    sets.append(
        f"outcome = CASE WHEN {w}.ended IS NOT NULL AND (excluded.ended IS NULL OR excluded.ended >= {w}.ended)"
        f" THEN {w}.outcome ELSE excluded.outcome END"
    )
    marks = ", ".join([mark] * len(WORKLOAD_COLS))
    upsert_w = (
        f"INSERT INTO {w} ({', '.join(WORKLOAD_COLS)}) VALUES ({marks}) "  # noqa: S608
        f"ON CONFLICT (key) DO UPDATE SET {', '.join(sets)}"
    )
    node_sets = [_latest(n, c) for c in ("gpus", "cpu_millis", "memory_bytes", "last_seen")]
    node_sets.append(_earliest(n, "first_seen"))
    upsert_n = (
        f"INSERT INTO {n} ({', '.join(NODE_COLS)}) VALUES ({', '.join([mark] * len(NODE_COLS))}) "  # noqa: S608
        f"ON CONFLICT (name) DO UPDATE SET {', '.join(node_sets)}"
    )
    wcols, ncols = ", ".join(WORKLOAD_COLS), ", ".join(NODE_COLS)
    return ReplayStatements(
        upsert_workload=upsert_w,
        upsert_node=upsert_n,
        workloads=f"SELECT {wcols} FROM {w} WHERE arrived >= {mark} AND arrived < {mark} ORDER BY arrived, key",  # noqa: S608
        nodes=f"SELECT {ncols} FROM {n} WHERE first_seen < {mark} AND last_seen >= {mark} ORDER BY name",  # noqa: S608
        open_workloads=f"SELECT {wcols} FROM {w} WHERE ended IS NULL",  # noqa: S608
        all_nodes=f"SELECT {ncols} FROM {n}",  # noqa: S608
        last_seen=f"SELECT MAX(last_seen) FROM {n}",  # noqa: S608
        prune=(
            f"DELETE FROM {w} WHERE ended IS NOT NULL AND ended < {mark}",  # noqa: S608
            f"DELETE FROM {n} WHERE last_seen < {mark}",  # noqa: S608
        ),
    )


class SqlReplayHistory(SqlHistory):
    """The fairness history with the replay records beside it (the port ReplayRecords, and what the
    replay recorder writes): a subclass gives `_replay_sql` as it gives `_sql`."""

    _replay_sql: ReplayStatements

    def record_replay(
        self, workloads: Iterable[WorkloadRecord] = (), nodes: Iterable[NodeRecord] = ()
    ) -> None:
        ws = [astuple(r) for r in workloads]
        ns = [astuple(r) for r in nodes]
        if not ws and not ns:
            return
        with self._tx() as db:
            cur = db.cursor()
            if ws:
                cur.executemany(self._replay_sql.upsert_workload, ws)
            if ns:
                cur.executemany(self._replay_sql.upsert_node, ns)

    def replay_open(self) -> tuple[list[WorkloadRecord], list[NodeRecord]]:
        """Return the workloads not yet ended and every node, for a restarted recorder to start from."""
        ws = self._rows(self._replay_sql.open_workloads)
        ns = self._rows(self._replay_sql.all_nodes)
        return [_workload(r) for r in ws], [_node(r) for r in ns]

    def replay_workloads(self, start: float, end: float) -> list[WorkloadRecord]:
        """Return the workloads that arrived in [start, end), by arrival."""
        return [_workload(r) for r in self._rows(self._replay_sql.workloads, (start, end))]

    def replay_node_rows(self, start: float, end: float) -> list[NodeRecord]:
        return [_node(r) for r in self._rows(self._replay_sql.nodes, (end, start))]

    def replay_jobs(self, start: float, end: float) -> Sequence[TraceJob]:
        ((last,),) = self._rows(self._replay_sql.last_seen)
        rows = self.replay_workloads(start, end)
        seen = [x for r in rows for x in (r.arrived, r.started, r.ended) if x is not None]
        # A job still running counts up to the last the recorder wrote (its nodes' latest sighting).
        until = max(([float(last)] if last is not None else []) + seen, default=end)
        return recorded_jobs(rows, until=until)

    def replay_nodes(self, start: float, end: float) -> Sequence[NodeSpec]:
        return recorded_nodes(self.replay_node_rows(start, end))

    def prune_replay(self, before: float) -> int:
        with self._tx() as db:
            return sum(db.execute(sql, (before,)).rowcount for sql in self._replay_sql.prune)


def _workload(r: Sequence[Any]) -> WorkloadRecord:
    return WorkloadRecord(*r)


def _node(r: Sequence[Any]) -> NodeRecord:
    return NodeRecord(*r)
