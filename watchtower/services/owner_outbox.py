"""How owner notices sit in the alert outbox: their message keys, the lanes owners' addresses go out in,
each owner's rate-limit ledger as a row of the notification log, and their figures on `/metrics`."""

from __future__ import annotations

import hashlib
from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter

from watchtower.domain.alerts.notify import NotifyEntry
from watchtower.domain.owners.notices import Ledger, Limits
from watchtower.domain.owners.resolve import REFUSALS
from watchtower.domain.promql.names import OWNER_NOTICES, OWNER_NOTICES_REFUSED
from watchtower.domain.workloads import WorkloadKey
from watchtower.ports import AlertStore

S = TypeVar("S")

# Owners' own addresses go through `owners.smtp_receiver`'s SMTP settings as `owner-notices/email/<lane>`.
# The outbox sends one message at a time per integration: owners' addresses go out in this many lanes, an
# owner always in the same one (its messages in order), so a storm's notices are not sent one by one.
OWNER_LANES = 8
LEDGER = "owner-notices/ledger"  # the nflog rows of the rate limits, one per owner


def owner_lanes(sender: S) -> dict[str, S]:
    """Return integration → sender for every lane of owners' addresses, all through the one sender."""
    return {lane(i): sender for i in range(OWNER_LANES)}


def lane(i: int) -> str:
    return f"owner-notices/email/{i}"


def lane_of(owner_id: str) -> str:
    """Return the lane of an owner's addresses: always the same one, so its messages go out in order."""
    return lane(int(owner_id[-6:], 16) % OWNER_LANES)


def message_key(integration: str, ident: str, owner: str) -> str:
    """Return the outbox key of one notice to one owner through one integration: the same after a restart
    or on a new leader, so the notice is stored once (`AlertStore.enqueue_once`)."""
    return "own_" + hashlib.sha256(f"{integration}\x00{ident}\x00{owner}".encode()).hexdigest()[:32]


def load_ledger(store: AlertStore, owner: str) -> Ledger:
    """Return an owner's ledger as the store keeps it (what the former leader, or this process before a
    restart, sent it lately); empty when none."""
    return ledger_of(store.nflog(LEDGER, owner))


def ledger_of(entry: NotifyEntry | None) -> Ledger:
    """Return the ledger a notification-log row keeps (`ledger_entry`'s); empty for none."""
    led = Ledger()
    if entry is not None:
        led.sends = sorted(float(t.partition("#")[0]) for t in entry.firing)
        for item in entry.resolved:
            text, _, at = item.rpartition("|")
            ns, kind, name = [*text.split("/", 2), "", ""][:3]
            led.per_workload[WorkloadKey(ns, kind, name)] = float(at)
    return led


def ledger_entry(led: Ledger, now: float, limits: Limits) -> NotifyEntry:
    """Return the ledger as a notification-log row: the day's send times and the hour's workloads."""
    # Numbered: a set, and one tick's sends share their time.
    sends = frozenset(f"{t:.3f}#{i}" for i, t in enumerate(led.sends) if now - t < limits.day)
    recent = frozenset(
        f"{k.namespace}/{k.kind}/{k.name}|{t:.3f}"
        for k, t in led.per_workload.items()
        if now - t < limits.per_workload
    )
    return NotifyEntry(sends, recent, now)


class OwnerMetrics:
    def __init__(self, *, registry: CollectorRegistry) -> None:
        self.notices = Counter(
            OWNER_NOTICES,
            "Owner notices by kind and what became of them (enqueued, digested, silenced, no_owner, opted_out)",
            ["kind", "outcome"],
            registry=registry,
        )
        self.refused = Counter(
            OWNER_NOTICES_REFUSED,
            "watchtower.dev/notify annotation values refused, by reason",
            ["reason"],
            registry=registry,
        )
        for r in REFUSALS:
            self.refused.labels(r)
