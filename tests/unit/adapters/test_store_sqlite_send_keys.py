"""The state store's send keys: a report email is enqueued once per key, ever, whatever is pruned."""

from __future__ import annotations

from pathlib import Path

from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.domain.alerts.outbox import OutboxMessage

T0 = 1_795_000_000.0


def msg(key: str, at: float = T0) -> OutboxMessage:
    return OutboxMessage(
        0, key, "fairness-report/email/0", "fairness:2026-W47", {"n": key}, at, next_attempt=at
    )


def test_a_key_enqueues_once_across_runs_and_reopening_the_store(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store = SQLiteAlertStore(db)
    assert (
        store.enqueue_once([msg("fairness:2026-W47:a@x.example"), msg("fairness:2026-W47:b@x.example")], T0)
        == 2
    )
    assert store.enqueue_once([msg("fairness:2026-W47:a@x.example")], T0 + 60) == 0
    store.close()
    store = SQLiteAlertStore(db)  # a restart
    assert (
        store.enqueue_once([msg("fairness:2026-W47:a@x.example"), msg("fairness:2026-W47:c@x.example")], T0)
        == 1
    )
    assert store.recorded(["fairness:2026-W47:a@x.example", "fairness:2026-W48:a@x.example"]) == {
        "fairness:2026-W47:a@x.example"
    }
    assert store.depth() == {"fairness-report/email/0": 3}
    store.close()


def test_pruning_delivered_rows_does_not_make_a_key_new(tmp_path: Path) -> None:
    store = SQLiteAlertStore(tmp_path / "state.db")
    store.enqueue_once([msg("fairness:2026-W47:a@x.example")], T0)
    (m,) = store.due(T0)
    store.begin_attempt(m.id, T0)
    store.delivered(m.id, T0)
    assert store.prune(T0 + 30 * 86400, silence_retention=1, delivered_retention=86400).outbox == 1
    assert store.messages() == []
    assert store.enqueue_once([msg("fairness:2026-W47:a@x.example", T0 + 30 * 86400)], T0 + 30 * 86400) == 0
    # Keys go with the history's retention, not the outbox's.
    assert store.prune_keys(T0 + 1) == 1
    assert store.recorded(["fairness:2026-W47:a@x.example"]) == set()
    store.close()
