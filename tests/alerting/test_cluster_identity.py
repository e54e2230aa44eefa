"""The cluster's name on every alert (`cluster.name` as the label `cluster.label`), through each real channel:
the store and the alerts it lists, a signed webhook to a real HTTP receiver, email to a real aiosmtpd server,
and the push into a real Alertmanager. An alert stored before the label existed goes on as the same alert."""

from __future__ import annotations

import asyncio
import time
from email import policy
from email.parser import BytesParser

import httpx
import pytest
import yaml
from fastapi import FastAPI

from tests.alerting.helpers import SECRET, T0, Clock, pending, settings, snapshot
from tests.alerting.servers import Receiver, plain_smtp_server
from tests.alerting.test_email_modes import mail_settings
from tests.alerting.test_notifications import Rig, hook_settings
from tests.alerting.test_push_to_real_alertmanager import EXTERNAL, _start, received
from tests.alerting.test_push_to_real_alertmanager import Rig as PushRig
from watchtower.adapters.senders import build_senders
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.api.routes.alerts import build_router
from watchtower.bootstrap import build_container
from watchtower.config import ConfigError, read_settings, settings_from_mapping
from watchtower.domain.alerts.model import fingerprint
from watchtower.domain.health import HEALTHY
from watchtower.domain.tick import Tick
from watchtower.runtime.cluster_name import named_cluster
from watchtower.runtime.config_reload import config_reloader
from watchtower.services.alerting import DeliveryWorker, build_alerting


def named(s, name: str, label: str = "cluster"):
    """The settings as the root leaves them once it has found the cluster's name (runtime.cluster_name.named_cluster);
    set without validation, as a defaulted name from a kubeconfig is."""
    return s.model_copy(update={"cluster": s.cluster.model_copy(update={"name": name, "label": label})})


class ClusterRig(Rig):
    """The notifications rig with the senders the runtime builds: emails name the cluster."""

    def __init__(self, s, backend, clock) -> None:
        super().__init__(s, backend, clock)
        self.worker = DeliveryWorker(
            store=self.store,
            senders=build_senders(s.alerting, http=self.http, cluster_label=s.cluster.label),
            clock=clock,
            cfg=s.alerting,
            rnd=lambda: 0.5,
        )


@pytest.fixture
def receiver():
    r = Receiver(SECRET)
    yield r
    r.stop()


async def test_the_webhook_and_the_stored_alerts_carry_the_cluster_and_link_to_its_watchtower(
    tmp_path, receiver
):
    s = named(hook_settings(receiver.url).model_copy(), "prod-eu-1", label="k8s_cluster")
    s = s.model_copy(
        update={"server": s.server.model_copy(update={"external_url": "https://wt.prod-eu.example/"})}
    )
    rig = ClusterRig(s, tmp_path, Clock())
    objs = [pending("job-a", "critical", T0 - 6 * 60)]
    await rig.tick(objs, T0)
    await rig.tick(objs, T0 + 30)
    (stored,) = rig.store.load_alerts()
    assert stored.labels["k8s_cluster"] == "prod-eu-1"
    (req,) = receiver.requests
    assert req["verified"]
    body = req["body"]
    (a,) = body["alerts"]
    assert a["labels"]["k8s_cluster"] == "prod-eu-1"
    assert body["commonLabels"]["k8s_cluster"] == "prod-eu-1"
    # Alertmanager's fingerprint of the labels sent, the cluster included: one alert in both.
    assert a["fingerprint"] == fingerprint(a["labels"])
    # Every link points to this cluster's own Watchtower, absolute.
    links = [a["generatorURL"], body["externalURL"]] + [
        v for k, v in a["annotations"].items() if k.endswith("_url")
    ]
    assert a["generatorURL"] == "https://wt.prod-eu.example/workloads/team-a/job-a?kind=Pod"
    assert all(u.startswith("https://wt.prod-eu.example/") for u in links), links
    await rig.close()


async def test_an_alert_stored_before_the_cluster_label_goes_on_as_the_same_alert_without_a_new_notification(
    tmp_path, receiver
):
    objs = [pending("job-a", "critical", T0 - 6 * 60)]
    before = Rig(hook_settings(receiver.url), tmp_path, Clock())
    await before.tick(objs, T0)
    await before.tick(objs, T0 + 30)
    (old,) = before.store.load_alerts()
    assert "cluster" not in old.labels and len(receiver.requests) == 1
    await before.close()

    # The upgrade: the same store, now with a cluster name.
    after = Rig(named(hook_settings(receiver.url), "prod"), tmp_path, Clock())
    for at in (T0 + 60, T0 + 30 + 5 * 60, T0 + 500):  # past a group interval, before it turns critical
        await after.tick(objs, at)
    (new,) = after.store.load_alerts()
    assert new.fingerprint == old.fingerprint
    assert (new.state, new.active_at, new.fired_at) == (old.state, old.active_at, old.fired_at)
    assert new.labels == {**old.labels, "cluster": "prod"}
    assert len(receiver.requests) == 1  # not fired again: the notification log knows it
    await after.close()
    # Read back as written: the store keeps the alert under the same key across a restart.
    again = SQLiteAlertStore(tmp_path / "alerts.db")
    try:
        assert [a.fingerprint for a in again.load_alerts()] == [old.fingerprint]
    finally:
        again.close()


async def test_the_email_names_the_cluster_and_its_header_stays_safe_with_a_hostile_name(tmp_path):
    ctl, inbox = plain_smtp_server()
    try:
        hostile = "prod\r\nBcc: evil@example.org\x00 Zürich <b>x</b>"
        s = named(mail_settings(ctl.port, "none", auth=False), hostile)
        rig = ClusterRig(s, tmp_path, Clock())
        await rig.tick([pending("job", "critical", T0 - 6 * 60)], T0)
        assert rig.store.depth() == {}  # sent, not rejected
        await rig.close()
    finally:
        ctl.stop()
    ((_, rcpts, raw),) = inbox.messages
    assert rcpts == ["oncall@example.org", "ml-team@example.org"]  # no recipient added
    m = BytesParser(policy=policy.default).parsebytes(raw)
    assert m["Bcc"] is None
    # (Read back, the RFC 2047 words may be folded with one more space between them.)
    subject = " ".join(m["Subject"].split())
    assert subject == "[FIRING:1] WorkloadWaitWarning team-a (prod Bcc: evil@example.org Zürich <b>x</b>)"
    assert "\r\n\r\n" in raw.decode("ascii")  # the headers are ASCII (RFC 2047 for the name)
    text = m.get_body(preferencelist=("plain",)).get_content().replace("\r\n", "\n")
    html = m.get_body(preferencelist=("html",)).get_content()
    assert "Cluster: prod Bcc: evil@example.org Zürich <b>x</b>\n" in text
    assert "Cluster: <b>prod Bcc: evil@example.org Zürich &lt;b&gt;x&lt;/b&gt;</b>" in html


async def test_the_email_subject_is_unchanged_without_a_cluster_label(tmp_path):
    ctl, inbox = plain_smtp_server()
    try:
        rig = ClusterRig(mail_settings(ctl.port, "none", auth=False), tmp_path, Clock())
        await rig.tick([pending("job", "critical", T0 - 6 * 60)], T0)
        await rig.close()
    finally:
        ctl.stop()
    (m,) = inbox.parsed()
    assert m["Subject"] == "[FIRING:1] WorkloadWaitWarning team-a"
    assert "Cluster:" not in m.get_body(preferencelist=("plain",)).get_content()


async def test_the_push_to_a_real_alertmanager_carries_the_cluster_label(tmp_path):
    r = Receiver("whsec_" + "A" * 24)
    s, (am,), _ = await _start("current", tmp_path, r)
    rig = PushRig(named(s, "prod-eu-1"), tmp_path)
    try:
        objs = [pending("job-a", "critical", time.time() - 6 * 60)]
        await rig.until(lambda: "job-a" in received(r), objs)
        a = received(r)["job-a"]
        assert a["labels"]["cluster"] == "prod-eu-1" and "cluster" not in a["annotations"]
        assert a["fingerprint"] == fingerprint(a["labels"])
        assert a["generatorURL"] == f"{EXTERNAL}/workloads/team-a/job-a?kind=Pod"
        listed = httpx.get(am.url + "/api/v2/alerts").json()
        assert [x["labels"]["cluster"] for x in listed] == ["prod-eu-1"]
    finally:
        await rig.close()
        am.stop()
        r.stop()


@pytest.mark.parametrize("bad", ["", "two\nlines", " padded", "tab\there", "x" * 254])
def test_a_bad_cluster_name_is_a_clear_configuration_error(bad):
    with pytest.raises(ConfigError) as e:
        settings_from_mapping({"cluster": {"name": bad}}, env={})
    assert "cluster.name" in str(e.value)


def test_a_cluster_name_may_be_any_printable_line():
    s = settings_from_mapping({"cluster": {"name": "arn:aws:eks:eu-west-1:1234:cluster/Zürich prod"}}, env={})
    assert s.cluster.name == "arn:aws:eks:eu-west-1:1234:cluster/Zürich prod"


async def test_the_slack_compatible_body_names_the_cluster_in_its_title(tmp_path, receiver):
    s = settings(
        {
            "route": {"receiver": "chat", "group_by": ["alertname", "namespace"], "group_wait": "0s"},
            "receivers": [
                {
                    "name": "chat",
                    "webhooks": [{"url": receiver.url, "secret": SECRET, "slack_compatible": True}],
                }
            ],
        }
    )
    rig = ClusterRig(named(s, "prod-eu-1"), tmp_path, Clock())
    await rig.tick([pending("job-a", "critical", T0 - 6 * 60)], T0)
    (req,) = receiver.requests
    assert req["body"]["text"] == "[FIRING:1] WorkloadWaitWarning team-a (prod-eu-1)"
    assert req["body"]["attachments"][0]["fallback"] == req["body"]["text"]
    await rig.close()


async def test_the_alerts_api_lists_the_cluster_label(tmp_path):
    s = named(settings({}), "prod-eu-1")
    clock = Clock(T0)
    store = SQLiteAlertStore(tmp_path / "alerts.db")
    svc = build_alerting(settings=s, store=store)
    snap, _ = snapshot([pending("job", "critical", T0 - 400)], T0, s)
    await svc.on_tick(Tick(at=T0, snapshot=snap))
    app = FastAPI()
    app.include_router(build_router(svc.admin, require_token=lambda: None, clock=clock))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://wt") as c:
        (listed,) = (await c.get("/api/v1/alerts")).json()
    store.close()
    assert listed["labels"]["cluster"] == "prod-eu-1"
    # The API's fingerprint is the stored alert's identity, which leaves the cluster label out.
    without = {k: v for k, v in listed["labels"].items() if k != "cluster"}
    assert listed["fingerprint"] == fingerprint(without)


async def test_a_reload_of_a_file_without_cluster_name_keeps_the_name_found_at_start(tmp_path):
    path = tmp_path / "watchtower.yaml"
    path.write_text(yaml.safe_dump({"alerting": {"resolved_retention": "1h"}}))
    s = named_cluster(read_settings(path, env={})[0], "prod-eu-1", "the kubeconfig context's cluster")
    store = SQLiteAlertStore(tmp_path / "alerts.db")
    try:
        c = build_container(
            s, clock=Clock(), source_health=lambda: HEALTHY, source_name="test", alert_store=store
        )
        reloader = config_reloader(c, path)
        path.write_text(yaml.safe_dump({"alerting": {"resolved_retention": "2h"}}))
        done = await asyncio.to_thread(reloader.poll)
    finally:
        store.close()
    assert done is not None and done.changes.live == ("alerting.resolved_retention",)
    assert done.changes.restart == ()  # the unset name is no change
    assert c.alerting is not None and c.alerting.evaluator.cluster == ("cluster", "prod-eu-1")
