"""The fairness history on each store backend (tests/fixtures/stores.py): SQLite in the alert store's file,
PostgreSQL on the alert store's connection, as the composition root opens them."""

from __future__ import annotations

from typing import Any

from tests.fixtures.stores import StoreBackend
from watchtower.adapters.history.postgres import PostgresFairnessHistory
from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.ports import FairnessHistory


def open_history(backend: StoreBackend) -> FairnessHistory:
    """Return a new history on the backend's database (a second replica, or the same after a restart)."""
    if backend.kind == "sqlite":
        return SQLiteFairnessHistory(backend.spec)
    store: Any = backend.open()  # closed by the fixture
    return PostgresFairnessHistory(store.transaction)


def everything(h: FairnessHistory) -> tuple[Any, ...]:
    """What the history holds, read through its port: what a report would see of all time."""
    far = 1e12
    return (
        h.episodes(0, far),
        h.preemptions(0, far),
        h.incidents(0, far),
        h.history_coverage(0, far),
        h.open_waits(),
    )
