"""The push into Alertmanager batch by batch, and grouping per workload, in the service's own alerting
(evaluation → push → outbox on a real SQLite store); nothing is sent here, the outbox is read."""

from __future__ import annotations

import time

import orjson
import pytest

from alerts.alertmanager import alertmanager_config
from tests.alerting.helpers import pending, settings, snapshot
from watchtower.domain.health import HEALTHY
from watchtower.domain.tick import Tick
from watchtower.ports import AlertStore
from watchtower.services.alerting import build_alerting
from watchtower.simulator import objects as o

AM = "http://127.0.0.1:9"  # never contacted: the messages stay in the outbox


def push_settings(**route):
    return settings(
        {
            "route": {"receiver": "hook", "group_by": ["alertname", "namespace"], **route},
            "receivers": [{"name": "hook", "webhooks": [{"url": "http://127.0.0.1:9/hook"}]}],
            "alertmanagers": [AM],
            "delivery": {"mode": "both"},
            "push": {"batch_size": 4},
        }
    )


def pushed(store: AlertStore) -> list[str]:
    """Return the workloads of every alert in the outbox's push messages, in the order stored."""
    out = []
    for m in sorted(store.messages(limit=1000), key=lambda m: m.id):
        if m.integration.startswith("alertmanager/"):
            out += [a["labels"]["workload"] for a in m.payload["alerts"]]
    return out


class FailingOnce:
    """The real store, whose `enqueue` fails once after `ok` calls (a full disk): the one fault no real
    part here can be made to show on cue."""

    def __init__(self, store: AlertStore, ok: int) -> None:
        self.store, self.ok = store, ok

    def __getattr__(self, name: str):
        return getattr(self.store, name)

    def enqueue(self, items):
        if self.ok == 0:
            self.ok = -1
            raise OSError("disk full")
        self.ok -= 1
        return self.store.enqueue(items)


async def test_a_push_cut_short_sends_the_rest_next_time_and_nothing_twice(store_backend):
    s = push_settings()
    now = time.time()
    objs = [pending(f"job-{i}", "critical", now - 6 * 60, ns="team-a") for i in range(10)]
    snap, _ = snapshot(objs, now, s)
    store = FailingOnce(store_backend.open(), ok=2)  # the third batch of four fails
    svc = build_alerting(settings=s, store=store)
    await svc.evaluator.on_tick(Tick(at=now, snapshot=snap, health=HEALTHY))
    with pytest.raises(OSError):
        await svc.pusher.push(now)
    first = pushed(store)
    assert len(first) == 8  # the two batches stored before the fault stay stored
    await svc.pusher.push(now + 1)  # the next evaluation, well within the resend interval
    after = pushed(store)
    assert sorted(after) == sorted(f"job-{i}" for i in range(10)) and len(after) == 10
    store.close()


def job_pod(job: str, created: float) -> dict:
    p = pending(f"{job}-x7k2p", "critical", created)
    p["metadata"]["ownerReferences"] = [
        o.owner_ref("Job", job, api_version="batch/v1", uid=o.new_uid(f"team-a/job/{job}"))
    ]
    return p


async def test_grouping_per_workload_keeps_a_pod_and_a_job_of_one_name_apart(store_backend):
    s = push_settings(group_by=["alertname", "workload"])
    assert alertmanager_config(s)["route"]["group_by"] == ["alertname", "workload", "kind"]
    now = time.time()
    snap, _ = snapshot([pending("train", "critical", now - 600), job_pod("train", now - 600)], now, s)
    store = store_backend.open()
    svc = build_alerting(settings=s, store=store)
    await svc.on_tick(Tick(at=now, snapshot=snap, health=HEALTHY))
    groups = svc.evaluator.dispatcher.groups.values()
    assert sorted(g.labels.get("kind", "") for g in groups) == ["Job", "Pod"]
    # Pushed, they are two alerts: `kind` is part of the identity Alertmanager gets.
    docs = [a for m in store.messages(limit=100) if m.integration.startswith("alertmanager/")
            for a in m.payload["alerts"]]  # fmt: skip
    assert sorted(d["labels"]["kind"] for d in docs) == ["Job", "Pod"]
    assert len({orjson.dumps(d["labels"], option=orjson.OPT_SORT_KEYS) for d in docs}) == 2
    store.close()
