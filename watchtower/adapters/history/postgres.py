"""The fairness history in PostgreSQL, in the alert store's database: the same rows and upserts by key as
the SQLite history (adapters/history/rows.py), so replicas sharing the database record each fact once.

It runs on the alert store's connection (handed in as its `transaction`), which has already migrated the
database to migration 4 and masks the URL's secrets in its errors.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any

from .estimate_rows import SqlEstimateHistory, estimate_statements
from .replay_rows import SqlReplayHistory, replay_statements
from .rows import statements

Transaction = Callable[[], contextlib.AbstractContextManager[Any]]


class PostgresFairnessHistory(SqlReplayHistory, SqlEstimateHistory):
    _sql = statements("%s")
    _replay_sql = replay_statements("%s")
    _estimate_sql = estimate_statements("%s")

    def __init__(self, transaction: Transaction, *, on_close: Callable[[], None] | None = None) -> None:
        self._transaction = transaction
        self._on_close = on_close

    def close(self) -> None:
        """Close the store opened for the history alone; a shared store is closed by its owner."""
        if self._on_close is not None:
            self._on_close()

    def _tx(self) -> contextlib.AbstractContextManager[Any]:
        return self._transaction()

    def _rows(self, sql: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        with self._tx() as db:
            return list(db.execute(sql, tuple(args)).fetchall())
