"""Owner notices end to end through the real parts: object fixtures → queue → the owner notices' service →
the alert outbox (SQLite and PostgreSQL) → DeliveryWorker → a real SMTP server (aiosmtpd) and a real webhook
receiver (Slack-compatible body), through a restart and a change of leader.

The Lease is not run here (tests/e2e/test_lease_fencing.py runs the real one): a replica's leadership is a
`Fence` the test holds, the port the delivery worker asks before each send."""

from __future__ import annotations

import httpx
import orjson
import pytest
from prometheus_client import CollectorRegistry

from tests.alerting.helpers import CLASSES, NO_FIT, SECRET, T0, Clock, running_pod, settings
from tests.alerting.servers import Receiver, plain_smtp_server
from tests.fixtures.stores import StoreBackend
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.adapters.senders import build_report_sender, build_senders
from watchtower.domain.alerts.matchers import Matcher
from watchtower.domain.alerts.silences import Silence
from watchtower.domain.health import HEALTHY
from watchtower.domain.queue_facts import notify_of
from watchtower.domain.tick import Tick
from watchtower.services.alerting import DeliveryWorker, build_alerting
from watchtower.services.analyze import analyze
from watchtower.services.owner_notices import OwnerNotifier
from watchtower.services.owner_outbox import OwnerMetrics, owner_lanes
from watchtower.simulator import objects as o

DEC = ObjectDecoder(read_notify=True)


def pod(
    name: str, ns: str, created: float, *, notify: str | None = None, tier: str = "low", gpus: int = 8
) -> dict:
    prio, pclass = CLASSES[tier]
    return o.pod(
        name=name,
        namespace=ns,
        created=created,
        gpus=gpus,
        priority=prio,
        priority_class=pclass,
        annotations={"watchtower.dev/notify": notify} if notify is not None else None,
        conditions=[o.unschedulable(created + 1, NO_FIT)],
    )


class Lease:
    """Which replica leads, and under which term (the Fence port, held by the test)."""

    def __init__(self) -> None:
        self.holder, self.transitions = "", 0

    def give(self, who: str) -> None:
        self.holder, self.transitions = who, self.transitions + 1

    def fence(self, who: str):
        lease = self

        class F:
            def term(self):
                return lease.transitions if lease.holder == who else None

            def holds(self, term):
                return lease.holder == who and lease.transitions == term

            def status(self):  # not read here
                raise NotImplementedError

        return F()


class Replica:
    """One Watchtower process: its alerting, owner notices and delivery worker on the shared store."""

    def __init__(self, s, backend: StoreBackend, clock: Clock, lease: Lease, name: str) -> None:
        self.s, self.clock, self.name = s, clock, name
        self.store = backend.open()
        self.http = httpx.AsyncClient()
        self.registry = CollectorRegistry()
        self.alerting = build_alerting(settings=s, store=self.store)
        self.state = None
        tiers = s.tier_policy()
        self.owners = self.alerting.owners = OwnerNotifier(
            policy=s.owners.policy(),
            limits=s.owners.limits(),
            store=self.store,
            integrations=lambda: self.alerting.notifier.integrations,
            present=lambda k: self.state is not None and k in self.state.by_workload,
            tier_of=lambda p, c: tiers.tier_of(p, c).name,
            team_of=lambda ns: ns,
            notify_of=lambda k: notify_of(self.state, k) if self.state is not None else "",
            metrics=OwnerMetrics(registry=self.registry),
        )
        senders = build_senders(s.alerting, http=self.http)
        senders.update(owner_lanes(build_report_sender(s.alerting, receiver="mail", http=self.http)))
        self.worker = DeliveryWorker(
            store=self.store,
            senders=senders,
            clock=clock,
            cfg=s.alerting,
            rnd=lambda: 0.5,
            fence=lease.fence(name),
        )

    async def tick(self, objs: list[dict], at: float) -> int:
        self.clock.t = at
        data = orjson.dumps(o.object_list([o.node(f"n{i}", gpus=8) for i in range(2)] + objs))
        a = analyze(data, policy=self.s.queue_policy(), decoder=DEC, at=at)
        self.state = a.state
        await self.alerting.on_tick(Tick(at=at, snapshot=a.snapshot, health=HEALTHY))
        await self.owners.settled()
        return await self.worker.drain()

    def refused(self, reason: str) -> float:
        return (
            self.registry.get_sample_value("watchtower_owner_notices_refused_total", {"reason": reason}) or 0
        )

    async def close(self) -> None:
        await self.http.aclose()
        self.store.close()


@pytest.fixture
def oncall():
    r = Receiver(SECRET)
    yield r
    r.stop()


@pytest.fixture
def team_hook():
    r = Receiver(SECRET)
    yield r
    r.stop()


@pytest.fixture
def smtp():
    ctl, inbox = plain_smtp_server()
    yield ctl, inbox
    ctl.stop()


def owner_settings(smtp_port: int, oncall_url: str, team_url: str):
    return settings(
        {
            "route": {"receiver": "oncall", "group_wait": "30s", "group_interval": "5m"},
            "receivers": [
                {"name": "oncall", "webhooks": [{"url": oncall_url, "secret": SECRET}]},
                {
                    "name": "mail",
                    "email": [
                        {
                            "to": ["gpu-oncall@corp.example"],
                            "from": "watchtower@corp.example",
                            "smarthost": "127.0.0.1",
                            "port": smtp_port,
                            "security": "none",
                        }
                    ],
                },
                {
                    "name": "team-b-slack",
                    "webhooks": [{"url": team_url, "secret": SECRET, "slack_compatible": True}],
                },
            ],
        },
        owners={
            "enabled": True,
            "smtp_receiver": "mail",
            "allowed_domains": ["corp.example"],
            "contacts": [
                {"namespace": "team-b", "receiver": "team-b-slack"},
                {"namespace": "team-f", "email": ["f-team@corp.example"]},
            ],
        },
    )


def ids(inbox) -> list[str]:
    return [m["Message-ID"] for m in inbox.parsed()]


async def test_owner_notices_arrive_once_through_a_restart_and_a_leader_change(
    store_backend, smtp, oncall, team_hook
):
    ctl, inbox = smtp
    s = owner_settings(ctl.port, oncall.url, team_hook.url)
    warn = next(t.warn_after for t in s.tiers if t.name == "low")
    lease, clock = Lease(), Clock()
    hostile = "http://127.0.0.1:9/steal"
    objs = [
        pod("train-a", "team-a", T0, notify="ana@corp.example, Bo@corp.example"),
        pod("train-b", "team-b", T0),  # no annotation: the namespace's contact, a Slack-compatible webhook
        pod("train-c", "team-c", T0, notify=hostile),  # refused, and team-c has no contact: no notice
        pod("train-d", "team-d", T0, notify="ana@corp.example\r\nBcc: all@corp.example"),
        pod("train-e", "team-a", T0, notify="off"),  # opted out
    ]
    t1 = T0 + warn + 60

    # The first process stores the notices, then dies before delivering any.
    lease.give("a")
    a = Replica(s, store_backend, clock, lease, "a")
    a.worker.stopping = True  # killed before its worker's first pass
    await a.tick(objs, t1)
    assert a.refused("url") == 1 and a.refused("header_injection") == 1
    await a.tick(objs, t1 + 30)
    assert a.refused("url") == 1  # counted once per workload and value, not per tick
    await a.close()
    assert inbox.messages == [] and team_hook.requests == []

    # Restarted: it derives the same notices, stores none again, and delivers the stored ones.
    a = Replica(s, store_backend, clock, lease, "a")
    await a.tick(objs, t1 + 60)
    mails = inbox.parsed()
    assert len(mails) == 1
    m = mails[0]
    assert sorted(inbox.messages[0][1]) == ["ana@corp.example", "bo@corp.example"]
    assert "train-a" in m["Subject"] and "past the low tier's warning threshold" in m["Subject"]
    assert m.get_body(("plain",)).get_content().count("It has waited") == 1
    assert m.get_body(("html",)) is not None
    assert "Bcc" not in str(m) or "all@corp.example" not in m["To"]
    assert len(team_hook.requests) == 1
    body = team_hook.requests[0]["body"]
    assert set(body) == {"text"} and "train-b" in body["text"] and team_hook.requests[0]["verified"]
    assert not any("train-c" in str(r["body"]) or "train-e" in str(r["body"]) for r in team_hook.requests)

    # A second replica takes the lease. The old leader stores a new workload's notice but can no longer
    # send it; the new leader derives the same notice, stores nothing twice, and sends the stored one.
    b = Replica(s, store_backend, clock, lease, "b")
    objs2 = [*objs, pod("train-a2", "team-a", T0 + 3600, notify="ana@corp.example,bo@corp.example")]
    t2 = T0 + 3600 + warn + 60
    lease.give("b")
    b.alerting.lead()
    assert await a.tick(objs2, t2) == 0  # not leading: nothing sent
    await b.tick(objs2, t2 + 5)
    subjects = [x["Subject"] for x in inbox.parsed()]
    assert sum("train-a2" in x for x in subjects) == 1

    # train-a starts: its owner hears it started after waiting past the threshold.
    started = running_pod("train-a", "n0", ns="team-a", created=T0, gpus=8)
    objs3 = [started, *objs2[1:]]
    await b.tick(objs3, t2 + 60)
    subjects = [x["Subject"] for x in inbox.parsed()]
    assert sum("started after" in x and "train-a" in x for x in subjects) == 1

    # Nothing twice: every message arrived once, under its own id; on-call's alerts went their own way.
    assert len(ids(inbox)) == len(set(ids(inbox))) == 3
    assert len({r["id"] for r in team_hook.requests}) == len(team_hook.requests) == 1
    assert not any("OwnerNotice" in str(r["body"]) for r in oncall.requests)
    await a.close()
    await b.close()


async def test_a_silence_on_the_workloads_labels_mutes_its_owner_notice(
    store_backend, smtp, oncall, team_hook
):
    ctl, inbox = smtp
    s = owner_settings(ctl.port, oncall.url, team_hook.url)
    warn = next(t.warn_after for t in s.tiers if t.name == "low")
    lease, clock = Lease(), Clock()
    lease.give("a")
    a = Replica(s, store_backend, clock, lease, "a")
    t1 = T0 + warn + 60
    a.store.put_silence(
        Silence("s1", (Matcher.parse('team="team-b"'),), T0, t1 + 86400, "me", "maintenance", T0, T0)
    )
    await a.tick([pod("train-b", "team-b", T0), pod("train-a", "team-a", T0, notify="ana@corp.example")], t1)
    assert team_hook.requests == []
    assert len(inbox.messages) == 1
    await a.close()


async def test_ten_messages_a_day_to_one_owner_then_one_digest_that_survives_a_restart(
    store_backend, smtp, oncall, team_hook
):
    ctl, inbox = smtp
    s = owner_settings(ctl.port, oncall.url, team_hook.url)
    warn = next(t.warn_after for t in s.tiers if t.name == "low")
    lease, clock = Lease(), Clock()
    lease.give("a")
    objs = [pod(f"job-{i:02d}", "team-f", T0 + i) for i in range(12)]
    t1 = T0 + warn + 60
    a = Replica(s, store_backend, clock, lease, "a")
    await a.tick(objs, t1)
    assert len(inbox.messages) == 10
    assert all(m[1] == ["f-team@corp.example"] for m in inbox.messages)
    await a.close()

    # Restarted within the day: nothing is sent again, the two held back wait for the digest.
    a = Replica(s, store_backend, clock, lease, "a")
    await a.tick(objs, t1 + 120)
    assert len(inbox.messages) == 10
    await a.tick(objs, t1 + 86400 + 60)
    assert len(inbox.messages) == 11
    digest = inbox.parsed()[-1]
    assert "2 notices about your workloads" in digest["Subject"]
    body = digest.get_body(("plain",)).get_content()
    assert "job-10" in body and "job-11" in body and "job-00" not in body
    await a.tick(objs, t1 + 86400 + 120)
    assert len(inbox.messages) == 11
    assert len(set(ids(inbox))) == 11
    await a.close()


async def test_work_that_can_never_start_gets_one_notice_per_wait_in_its_own_numbers(
    store_backend, smtp, oncall, team_hook
):
    """A pod asking 16 GPUs where every node has 8: never.py's finding reaches its owner once."""
    ctl, inbox = smtp
    s = owner_settings(ctl.port, oncall.url, team_hook.url)
    lease, clock = Lease(), Clock()
    lease.give("a")
    a = Replica(s, store_backend, clock, lease, "a")
    objs = [pod("huge", "team-f", T0, gpus=16)]
    await a.tick(objs, T0 + 60)
    await a.tick(objs, T0 + 120)
    mails = [m for m in inbox.parsed() if "can never start" in m["Subject"]]
    assert len(mails) == 1, [m["Subject"] for m in inbox.parsed()]
    assert "asks 16 GPUs per pod" in mails[0].get_body(("plain",)).get_content()
    await a.close()


async def test_work_that_can_never_start_is_not_also_told_past_its_threshold_until_the_verdict_clears(
    store_backend, smtp, oncall, team_hook
):
    """The owner of a 16-GPU pod on 8-GPU nodes hears "can never start" and not, once its wait passes the
    tier's warning threshold, "past its threshold" for the same wait; a 16-GPU node clears the verdict, and
    the threshold notice follows at its real wait."""
    ctl, inbox = smtp
    s = owner_settings(ctl.port, oncall.url, team_hook.url)
    warn = next(t.warn_after for t in s.tiers if t.name == "low")
    lease, clock = Lease(), Clock()
    lease.give("a")
    a = Replica(s, store_backend, clock, lease, "a")
    huge = pod("huge", "team-f", T0, gpus=16)
    await a.tick([huge], T0 + 60)
    await a.tick([huge], T0 + warn + 60)
    await a.tick([huge], T0 + warn + 120)
    subjects = [m["Subject"] for m in inbox.parsed()]
    assert len(subjects) == 1 and "can never start" in subjects[0], subjects
    await a.tick([o.node("big", gpus=16), huge], T0 + warn + 180)
    subjects = [m["Subject"] for m in inbox.parsed()]
    assert len(subjects) == 2 and "past the low tier's warning threshold" in subjects[1], subjects
    await a.close()
