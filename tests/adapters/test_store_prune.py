"""Pruning the alert store, on a real SQLite file and a real PostgreSQL: what it no longer acts on goes,
everything else stays."""

from __future__ import annotations

import pytest

from tests.fixtures.stores import StoreBackend
from watchtower.domain.alerts.matchers import Matcher
from watchtower.domain.alerts.notify import NotifyEntry, needs_update
from watchtower.domain.alerts.outbox import OutboxMessage, PruneResult
from watchtower.domain.alerts.silences import Silence
from watchtower.ports import AlertStore

DAY = 86400.0
NOW = 1_800_000_000.0
RETENTION = {"silence_retention": 5 * DAY, "delivered_retention": 7 * DAY}
OPS = "ops/webhook/0"
GONE = "gone/webhook/0"


def _silence(sid: str, ends_at: float) -> Silence:
    m = (Matcher.of("alertname", "=", "QueueWaitTooLong"),)
    return Silence(sid, m, ends_at - 3600, ends_at, "ops", "maintenance", ends_at - 3600, ends_at - 3600)


def _enqueue(store: AlertStore, key: str, created: float, integration: str = OPS) -> int:
    msg = OutboxMessage(0, key, integration, key, {"version": "4"}, created, next_attempt=created)
    store.enqueue([(msg, integration, key, NotifyEntry(frozenset({key}), frozenset(), created))])
    return next(m.id for m in store.messages(limit=100) if m.key == key)


def _log(store: AlertStore, group: str, firing: set[str], resolved: set[str], at: float) -> None:
    store.enqueue([(None, OPS, group, NotifyEntry(frozenset(firing), frozenset(resolved), at))])


@pytest.fixture
def db(store_backend: StoreBackend) -> StoreBackend:
    """A store holding, for each table, rows on both sides of the retentions."""
    store = store_backend.open()
    store.put_silence(_silence("expired-long-ago", NOW - 6 * DAY))
    store.put_silence(_silence("expired-yesterday", NOW - DAY))
    store.put_silence(_silence("active", NOW + 3600))

    # Enqueued in this order, so the old pending message is the head of OPS's queue.
    _enqueue(store, "pending-old", NOW - 30 * DAY)
    retrying = _enqueue(store, "retrying-old", NOW - 20 * DAY)
    store.begin_attempt(retrying, NOW - 20 * DAY)
    store.retry_at(retrying, NOW + 60, "503 Service Unavailable")
    delivered_old = _enqueue(store, "delivered-old", NOW - 10 * DAY)
    store.delivered(delivered_old, NOW - 10 * DAY)
    failed_old = _enqueue(store, "failed-old", NOW - 9 * DAY)
    store.begin_attempt(failed_old, NOW - 9 * DAY)
    store.failed(failed_old, "400 Bad Request")
    # Created long ago but given up only two days ago, after retrying since.
    failed_late = _enqueue(store, "failed-after-retrying", NOW - 10 * DAY)
    store.retry_at(failed_late, NOW - 2 * DAY, "timeout")
    store.failed(failed_late, "out of attempts")
    delivered_recent = _enqueue(store, "delivered-recent", NOW - DAY)
    store.delivered(delivered_recent, NOW - DAY)
    _enqueue(store, "disabled-old", NOW - 20 * DAY, integration=GONE)
    store.disable(GONE, "410 Gone", NOW - 20 * DAY)

    # The log of groups told that everything resolved, and of one last told that "a" fires.
    _log(store, "resolved-long-ago", set(), {"a"}, NOW - 8 * DAY)
    _log(store, "resolved-yesterday", set(), {"a"}, NOW - DAY)
    _log(store, "firing-long-ago", {"a"}, set(), NOW - 30 * DAY)
    store.close()
    return store_backend


def _keys(store: AlertStore) -> set[str]:
    return {m.key for m in store.messages(limit=100)}


KEPT_MESSAGES = {
    "pending-old",
    "retrying-old",
    "failed-after-retrying",
    "delivered-recent",
    "disabled-old",
}


def test_prune_removes_what_is_past_retention_and_keeps_the_rest(db: StoreBackend):
    store = db.open()
    assert store.prune(NOW, **RETENTION) == PruneResult(silences=1, outbox=2, nflog=1)

    assert [s.id for s in store.silences()] == ["active", "expired-yesterday"]
    assert _keys(store) == KEPT_MESSAGES
    assert store.messages(status="delivered")[0].key == "delivered-recent"
    assert [m.key for m in store.messages(status="failed")] == ["failed-after-retrying"]
    assert store.nflog(OPS, "resolved-long-ago") is None
    assert store.nflog(OPS, "resolved-yesterday") is not None
    assert store.nflog(OPS, "firing-long-ago") == NotifyEntry(frozenset({"a"}), frozenset(), NOW - 30 * DAY)
    for group in (KEPT_MESSAGES - {"disabled-old"}) | {"delivered-old", "failed-old"}:
        assert store.nflog(OPS, group) is not None  # logged as firing when enqueued: kept
    store.close()

    reopened = db.open()
    assert [s.id for s in reopened.silences()] == ["active", "expired-yesterday"]
    assert _keys(reopened) == KEPT_MESSAGES
    assert reopened.nflog(OPS, "resolved-long-ago") is None
    assert reopened.prune(NOW, **RETENTION) == PruneResult(silences=0, outbox=0, nflog=0)
    reopened.close()


def test_pending_retrying_and_disabled_messages_survive_any_age_and_are_still_delivered_in_order(
    db: StoreBackend,
):
    store = db.open()
    result = store.prune(NOW + 365 * DAY, **RETENTION)
    assert result.outbox == 4  # every delivered and failed message
    assert _keys(store) == {"pending-old", "retrying-old", "disabled-old"}
    assert store.depth() == {OPS: 2}
    assert [m.key for m in store.due(NOW)] == ["pending-old"]
    retrying = next(m for m in store.messages() if m.key == "retrying-old")
    assert (retrying.attempts, retrying.next_attempt, retrying.last_error) == (
        1,
        NOW + 60,
        "503 Service Unavailable",
    )
    assert store.enable(GONE, NOW)
    assert [m.key for m in store.due(NOW)] == ["pending-old", "disabled-old"]
    store.close()


def test_a_silence_is_kept_until_it_has_been_expired_for_the_whole_retention(db: StoreBackend):
    store = db.open()
    ended = NOW - 6 * DAY
    assert store.prune(ended + 5 * DAY, **RETENTION).silences == 0  # exactly the retention: kept
    assert store.prune(ended + 5 * DAY + 1, **RETENTION).silences == 1
    assert "expired-long-ago" not in {s.id for s in store.silences()}
    store.close()


@pytest.mark.parametrize(
    ("firing", "resolved", "send_resolved"),
    [
        (frozenset(), frozenset(), True),
        (frozenset(), frozenset({"a"}), True),
        (frozenset({"a"}), frozenset(), True),
        (frozenset({"a"}), frozenset({"b"}), False),
    ],
)
def test_a_pruned_log_entry_changes_no_notify_decision(db: StoreBackend, firing, resolved, send_resolved):
    store = db.open()
    before = store.nflog(OPS, "resolved-long-ago")
    assert before is not None and not before.firing
    store.prune(NOW, **RETENTION)
    after = store.nflog(OPS, "resolved-long-ago")
    assert after is None
    for repeat_interval in (60.0, 4 * 3600.0, 30 * DAY):
        kw = {"now": NOW, "repeat_interval": repeat_interval, "send_resolved": send_resolved}
        assert needs_update(before, firing, resolved, **kw) == needs_update(after, firing, resolved, **kw)
    store.close()


def test_a_transaction_that_fails_half_way_leaves_nothing_behind_and_the_store_usable(db: StoreBackend):
    store = db.open()
    before = _keys(store)

    def items():
        msg = OutboxMessage(0, "half", OPS, "g", {"version": "4"}, NOW, next_attempt=NOW)
        yield msg, OPS, "g", NotifyEntry(frozenset({"x"}), frozenset(), NOW)
        raise RuntimeError("the payload could not be built")

    with pytest.raises(RuntimeError):
        store.enqueue(items())
    assert _keys(store) == before and store.nflog(OPS, "g") is None
    assert store.prune(NOW, **RETENTION).outbox == 2  # a new transaction begins: none was left open
    store.close()


def test_an_alert_stored_under_the_old_fingerprint_is_keyed_again_and_stays_one_alert(store_backend):
    """Before the fingerprint became Alertmanager's, alerts were stored under a SHA-256 prefix: after the
    upgrade the same labels must load as the same alert, once, under the new key."""
    from dataclasses import replace

    from watchtower.domain.alerts.model import AlertState, TrackedAlert, fingerprint

    labels = {"alertname": "WorkloadWaitWarning", "namespace": "team-a"}
    new = TrackedAlert(fingerprint(labels), labels, {}, AlertState.FIRING, 1.0, 2.0, fired_at=1.5)
    old = replace(new, fingerprint="de19324505dd0150")  # what the earlier version stored for these labels
    store = store_backend.open()
    store.save_alerts([old])
    assert store.load_alerts() == [new]
    store.close()
    again = store_backend.open()
    assert again.load_alerts() == [new]  # re-keyed in the file, not only in memory
    again.save_alerts([], delete=[new.fingerprint])
    assert again.load_alerts() == []  # no row left behind under the old key
    again.close()
