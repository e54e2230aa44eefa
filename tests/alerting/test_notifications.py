"""End to end through the real parts: object fixtures → queue → alerting (evaluation, notification) → outbox (SQLite and PostgreSQL) →
DeliveryWorker → a real webhook receiver / a real SMTP server (STARTTLS + AUTH). The clock is injected."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.alerting.helpers import SECRET, T0, Clock, pending, settings, snapshot
from tests.alerting.servers import PASSWORD, USER, Receiver, client_tls, self_signed, smtp_server
from tests.fixtures.stores import StoreBackend
from watchtower.adapters.senders import build_senders
from watchtower.domain.alerts.matchers import Matcher
from watchtower.domain.health import HEALTHY
from watchtower.domain.tick import Tick
from watchtower.services.alerting import DeliveryWorker, build_alerting
from watchtower.simulator import objects as o


@pytest.fixture
def receiver():
    r = Receiver(SECRET)
    yield r
    r.stop()


def hook_settings(url: str, **route):
    return settings(
        {
            "route": {
                "receiver": "hook",
                "group_by": ["alertname", "tier"],
                "group_wait": "30s",
                "group_interval": "5m",
                "repeat_interval": "4h",
                **route,
            },
            "receivers": [{"name": "hook", "webhooks": [{"url": url, "secret": SECRET}]}],
        }
    )


class Rig:
    def __init__(self, s, backend, clock, tls=None, health=None):
        """`backend`: a StoreBackend (the store suite, on each database), or a directory for an SQLite file
        (the scenarios about alerting itself, not the store)."""
        self.s, self.clock = s, clock
        if isinstance(backend, Path):
            backend = StoreBackend("sqlite", str(backend / "alerts.db"))
        self.store = backend.open()
        self.http = httpx.AsyncClient()
        # What the queue tracker puts in each Tick: the source's health (healthy unless a test says).
        self.health = health if health is not None else (lambda: HEALTHY)
        self.svc = build_alerting(settings=s, store=self.store)
        self.worker = DeliveryWorker(
            store=self.store,
            senders=build_senders(s.alerting, http=self.http, tls_context=tls),
            clock=clock,
            cfg=s.alerting,
            rnd=lambda: 0.5,
        )

    async def tick(self, objs, at):
        self.clock.t = at
        snap, _ = snapshot(objs, at, self.s)
        await self.svc.on_tick(Tick(at=at, snapshot=snap, health=self.health()))
        return await self.worker.drain()

    async def close(self):
        await self.http.aclose()
        self.store.close()


def alerts_in(req):
    return sorted(
        (a["labels"]["alertname"], a["labels"]["workload"], a["status"]) for a in req["body"]["alerts"]
    )


async def test_each_tier_notifies_exactly_the_workloads_past_its_threshold(store_backend, tmp_path, receiver):
    rig = Rig(hook_settings(receiver.url), store_backend, Clock())
    objs = [
        pending("crit-6m", "critical", T0 - 6 * 60),  # critical warns after 5m
        pending("crit-4m", "critical", T0 - 4 * 60),
        pending("high-10m", "high", T0 - 10 * 60),  # high warns after 15m
        pending("med-31m", "medium", T0 - 31 * 60),  # medium warns after 30m
        pending("low-3h", "low", T0 - 3 * 3600),  # low warns after 2h
        pending("high-61m", "high", T0 - 61 * 60),  # high is critical after 1h
    ]
    assert await rig.tick(objs, T0) == 0  # group_wait has not passed
    await rig.tick(objs, T0 + 30)
    got = sorted(a for r in receiver.requests for a in alerts_in(r))
    assert got == [
        ("WorkloadWaitCritical", "high-61m", "firing"),
        ("WorkloadWaitWarning", "crit-6m", "firing"),
        ("WorkloadWaitWarning", "low-3h", "firing"),
        ("WorkloadWaitWarning", "med-31m", "firing"),
    ]  # high-61m's warning is inhibited by its critical
    assert all(r["verified"] for r in receiver.requests)
    assert len(receiver.requests) == 4  # one per (alertname, tier) group
    body = receiver.requests[0]["body"]
    assert body["version"] == "4" and body["receiver"] == "hook" and body["status"] == "firing"
    # Ticking again within the group interval sends nothing new.
    await rig.tick(objs, T0 + 60)
    assert len(receiver.requests) == 4
    await rig.close()


async def test_a_workload_that_gets_scheduled_sends_a_resolved_notification(
    store_backend, tmp_path, receiver
):
    rig = Rig(hook_settings(receiver.url), store_backend, Clock())
    objs = [pending("job", "critical", T0 - 6 * 60)]
    await rig.tick(objs, T0)
    await rig.tick(objs, T0 + 30)
    assert [alerts_in(r) for r in receiver.requests] == [[("WorkloadWaitWarning", "job", "firing")]]
    await rig.tick([], T0 + 60)  # scheduled: gone from the queue
    assert len(receiver.requests) == 1  # waits for group_interval
    await rig.tick([], T0 + 30 + 300)
    assert [alerts_in(r) for r in receiver.requests][1] == [("WorkloadWaitWarning", "job", "resolved")]
    assert receiver.requests[1]["body"]["status"] == "resolved"
    assert receiver.requests[1]["body"]["alerts"][0]["endsAt"].startswith("2025-")
    await rig.close()


async def test_a_silence_mutes_until_it_expires_then_the_alert_is_sent(store_backend, tmp_path, receiver):
    rig = Rig(hook_settings(receiver.url), store_backend, Clock())
    rig.svc.admin.add_silence(
        matchers=[Matcher.parse('namespace="team-a"'), Matcher.parse('alertname=~"WorkloadWait.*"')],
        starts_at=T0 - 1,
        ends_at=T0 + 600,
        created_by="oncall",
        comment="maintenance",
        now=T0,
    )
    objs = [pending("job", "medium", T0 - 31 * 60)]  # critical only after 2h
    for t in (T0, T0 + 30, T0 + 330):
        await rig.tick(objs, t)
    assert receiver.requests == []
    listed = rig.svc.admin.listed_alerts(T0 + 330)
    assert listed[0][1].silenced_by  # muted by the silence (a typed Muted, no "silence:<id>" string)
    await rig.tick(objs, T0 + 630)  # silence over, next group interval
    assert [alerts_in(r) for r in receiver.requests] == [[("WorkloadWaitWarning", "job", "firing")]]
    await rig.close()


async def test_critical_inhibits_the_warning_of_the_same_workload_only(store_backend, tmp_path, receiver):
    rig = Rig(hook_settings(receiver.url, group_by=["namespace"]), store_backend, Clock())
    objs = [pending("late", "critical", T0 - 16 * 60), pending("early", "critical", T0 - 6 * 60)]
    await rig.tick(objs, T0)
    await rig.tick(objs, T0 + 30)
    assert [alerts_in(r) for r in receiver.requests] == [
        [("WorkloadWaitCritical", "late", "firing"), ("WorkloadWaitWarning", "early", "firing")]
    ]
    await rig.close()


async def test_work_that_can_never_start_is_told_once_and_its_waits_resume_when_the_verdict_clears(
    store_backend, tmp_path, receiver
):
    """On-call hears of a 16-GPU pod on 8-GPU nodes as "can never start", not also as a wait past its
    thresholds; once a 16-GPU node is listed it may start, and its wait alert follows at its real wait."""
    rig = Rig(hook_settings(receiver.url), store_backend, Clock())
    huge = pending("huge", "critical", T0 - 16 * 60, gpus=16)  # past its critical threshold (15m)
    await rig.tick([huge], T0)
    await rig.tick([huge], T0 + 30)
    assert [alerts_in(r) for r in receiver.requests] == [[("WorkloadCanNeverStart", "huge", "firing")]]
    # Both wait alerts fire all the same (the API lists them), muted by the never alert.
    listed = {a.alertname: (a, m) for a, m in rig.svc.admin.listed_alerts(T0 + 30)}
    assert set(listed) == {"WorkloadCanNeverStart", "WorkloadWaitWarning", "WorkloadWaitCritical"}
    never_fp = listed["WorkloadCanNeverStart"][0].fingerprint
    assert listed["WorkloadWaitCritical"][1].inhibited_by == (never_fp,)
    assert listed["WorkloadCanNeverStart"][1].inhibited_by == ()  # not muted by the critical wait

    # A 16-GPU node: the pod may start once it is free. The never alert resolves; its wait, 16 minutes and
    # more, is notified at the next group interval, with no new wait from the moment the verdict cleared.
    big = o.node("big", gpus=16)
    await rig.tick([big, huge], T0 + 60)
    await rig.tick([big, huge], T0 + 330)
    sent = [alerts_in(r) for r in receiver.requests[1:]]
    assert sorted(sent) == [
        [("WorkloadCanNeverStart", "huge", "resolved")],
        [("WorkloadWaitCritical", "huge", "firing")],  # its warning muted by the critical, as ever
    ]
    crit = next(r for r in receiver.requests if "WorkloadWaitCritical" in str(r["body"]))
    assert int(crit["body"]["alerts"][0]["annotations"]["wait_seconds"]) == 16 * 60 + 330
    await rig.close()


async def test_webhook_500_then_429_with_retry_after_then_200_delivers_once_with_one_id(
    store_backend, tmp_path, receiver
):
    clock = Clock()
    rig = Rig(hook_settings(receiver.url), store_backend, clock)
    receiver.script = [(500, {}), (429, {"Retry-After": "120"})]
    objs = [pending("job", "critical", T0 - 6 * 60)]
    await rig.tick(objs, T0)
    await rig.tick(objs, T0 + 30)  # 500: retried after the base backoff (5s)
    assert len(receiver.requests) == 1
    clock.t = T0 + 36
    await rig.worker.drain()  # 429 asks for 120 s
    assert len(receiver.requests) == 2
    clock.t = T0 + 36 + 100
    await rig.worker.drain()
    assert len(receiver.requests) == 2  # Retry-After honoured
    clock.t = T0 + 36 + 121
    await rig.worker.drain()
    assert len(receiver.requests) == 3
    assert len({r["id"] for r in receiver.requests}) == 1
    assert all(r["verified"] for r in receiver.requests)
    assert rig.store.depth() == {}
    await rig.close()


async def test_webhook_410_disables_the_endpoint_and_raises_a_self_alert(store_backend, tmp_path, receiver):
    rig = Rig(hook_settings(receiver.url), store_backend, Clock())
    receiver.script = [(410, {})]
    objs = [pending("job", "critical", T0 - 6 * 60)]
    await rig.tick(objs, T0)
    await rig.tick(objs, T0 + 30)
    assert rig.store.disabled().keys() == {"hook/webhook/0"}
    await rig.tick(objs, T0 + 60)
    names = {a.alertname for a, _ in rig.svc.admin.listed_alerts(T0 + 60)}
    assert "WatchtowerReceiverGone" in names
    await rig.tick(objs, T0 + 400)
    assert len(receiver.requests) == 1  # nothing more is sent to it
    await rig.close()


async def test_webhook_400_is_not_retried(store_backend, tmp_path, receiver):
    clock = Clock()
    rig = Rig(hook_settings(receiver.url), store_backend, clock)
    receiver.script = [(400, {})]
    objs = [pending("job", "critical", T0 - 6 * 60)]
    await rig.tick(objs, T0)
    await rig.tick(objs, T0 + 30)
    clock.t = T0 + 3600
    await rig.worker.drain()
    assert len(receiver.requests) == 1
    assert rig.store.messages(status="failed")[0].last_error.startswith("HTTP 400")
    await rig.close()


def email_settings(port: int, **route):
    return settings(
        {
            "route": {
                "receiver": "mail",
                "group_by": ["alertname", "namespace"],
                "group_wait": "30s",
                **route,
            },
            "receivers": [
                {
                    "name": "mail",
                    "email": [
                        {
                            "to": ["oncall@example.org", "ml-team@example.org"],
                            "from": "watchtower@example.org",
                            "smarthost": "127.0.0.1",
                            "port": port,
                            "security": "starttls",
                            "username": USER,
                            "password": PASSWORD,
                            "timeout": "3s",
                        }
                    ],
                }
            ],
        }
    )


async def test_many_workloads_of_one_group_arrive_in_one_threaded_email_over_starttls_with_auth(
    store_backend, tmp_path
):
    cert, key = self_signed(tmp_path)
    ctl, inbox = smtp_server(cert, key)
    try:
        rig = Rig(email_settings(ctl.port), store_backend, Clock(), tls=client_tls(cert))
        objs = [pending(f"job-{i:02d}", "medium", T0 - 40 * 60 - i) for i in range(40)]
        await rig.tick(objs, T0)
        await rig.tick(objs, T0 + 30)
        msgs = inbox.parsed()
        assert len(msgs) == 1
        m = msgs[0]
        assert m["Subject"] == "[FIRING:40] WorkloadWaitWarning team-a"
        assert inbox.messages[0][1] == ["oncall@example.org", "ml-team@example.org"]
        html = m.get_body(("html",)).get_content()
        text = m.get_body(("plain",)).get_content()
        assert all(f"job-{i:02d}" in html and f"job-{i:02d}" in text for i in range(40))
        first_ref = m["References"]
        # Resolution of the group threads under the same root.
        await rig.tick([], T0 + 400)
        msgs = inbox.parsed()
        assert len(msgs) == 2 and msgs[1]["Subject"] == "[RESOLVED:40] WorkloadWaitWarning team-a"
        assert msgs[1]["References"] == first_ref == msgs[1]["In-Reply-To"]
        assert msgs[1]["Message-ID"] != m["Message-ID"]
        await rig.close()
    finally:
        ctl.stop()


async def test_smtp_down_then_up_delivers_every_notification_once_in_order(store_backend, tmp_path):
    from tests.alerting.servers import free_port

    cert, key = self_signed(tmp_path)
    port = free_port()
    clock = Clock()
    rig = Rig(
        email_settings(port, group_by=["alertname", "namespace", "workload"]),
        store_backend,
        clock,
        tls=client_tls(cert),
    )
    objs = []
    for i in range(3):  # one group per workload, each appearing a minute apart
        objs.append(pending(f"job-{i}", "critical", T0 - 6 * 60 + 60 * i))
        await rig.tick(list(objs), T0 + 60 * i + 60)
    await rig.tick(list(objs), T0 + 400)
    assert sum(rig.store.depth().values()) == 3
    ctl, inbox = smtp_server(cert, key, port=port)
    try:
        clock.t = T0 + 3600
        await rig.worker.drain()
        subjects = [m["X-Watchtower-Idempotency-Key"] for m in inbox.parsed()]
        assert len(subjects) == 3 == len(set(subjects))
        order = [m.get_body(("plain",)).get_content().split("team-a/")[1].split()[0] for m in inbox.parsed()]
        assert order == ["job-0", "job-1", "job-2"]
        assert rig.store.depth() == {}
        await rig.close()
    finally:
        ctl.stop()


async def test_hostile_annotation_is_escaped_in_html_and_cannot_inject_headers(store_backend, tmp_path):
    cert, key = self_signed(tmp_path)
    ctl, inbox = smtp_server(cert, key)
    try:
        rig = Rig(email_settings(ctl.port), store_backend, Clock(), tls=client_tls(cert))
        note = '<script>alert("x")</script>\r\nBcc: victim@evil.example'
        objs = [pending("job", "critical", T0 - 6 * 60, note=note)]
        await rig.tick(objs, T0)
        await rig.tick(objs, T0 + 30)
        (m,) = inbox.parsed()
        html = m.get_body(("html",)).get_content()
        assert "<script>" not in html
        assert inbox.messages[0][1] == ["oncall@example.org", "ml-team@example.org"]
        assert m["Bcc"] is None
        await rig.close()
    finally:
        ctl.stop()


async def test_a_restart_after_a_storm_keeps_the_alerts_and_sends_nothing_again(
    store_backend, tmp_path, receiver
):
    s = hook_settings(receiver.url, group_by=["alertname", "namespace"], group_wait="0s")
    objs = [pending(f"job-{i}", "medium", T0 - 31 * 60, ns=f"team-{i % 3}") for i in range(30)]
    rig = Rig(s, store_backend, Clock())
    await rig.tick(objs, T0)
    await rig.tick(objs, T0 + 20)  # within LAST_SEEN_SLACK: nothing rewritten, still all stored
    assert len(receiver.requests) == 3
    await rig.close()

    again = Rig(s, store_backend, Clock())  # same database file: a restart
    assert len(again.svc.evaluator.alerts) == 30 and all(
        a.state.value == "firing" for a in again.svc.evaluator.alerts.values()
    )
    assert {a.fired_at for a in again.svc.evaluator.alerts.values()} == {T0}
    await again.tick(objs, T0 + 40)
    assert len(receiver.requests) == 3
    # Scheduled since: resolved, and the restarted service sends that.
    await again.tick([], T0 + 400)
    assert [r["body"]["status"] for r in receiver.requests[3:]] == ["resolved"] * 3
    await again.close()
