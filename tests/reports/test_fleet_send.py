"""The fleet report's weekly send end to end: the weekly job (a real APScheduler 3 on the test's loop, a
real store file) builds the fleet report from a real Prometheus holding two clusters' labelled series and
two real Watchtowers (uvicorn on 127.0.0.1), enqueues it once per address, and the outbox delivers it to a
real SMTP server (aiosmtpd). A restart of the job in the same week sends nothing more; a dead Watchtower
and a dead engine are named missing in the mail, not a crash."""

from __future__ import annotations

import asyncio
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from tests.alerting.servers import plain_smtp_server, serve
from tests.prometheus.known_week import openmetrics
from tests.prometheus.prom_server import PrometheusProcess, backfill, free_port, have_prometheus
from tests.reports.sample import StandIn
from tests.reports.test_report_fleet import FAIRNESS, TOKEN, history_of, labelled, without_speech
from tests.reports.test_report_joined import NOW, THE_WEEK, S
from watchtower.adapters.email import EmailSender
from watchtower.adapters.report.presenter import FairnessPresenter
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.api.app import create_app
from watchtower.bootstrap import build_container
from watchtower.config import Settings, settings_from_mapping
from watchtower.config.fairness import FairnessConfig
from watchtower.domain.health import SourceHealth
from watchtower.runtime.fleet_report import fleet_mailer
from watchtower.runtime.weekly_report import schedule_fairness
from watchtower.services.alerting import DeliveryWorker
from watchtower.services.fairness_send import REPORT_INTEGRATION, FairnessMailer

pytestmark = pytest.mark.prometheus

RECIPIENTS = ["lead@x.example", "Ops@x.example"]
ODD = "c&<i>"  # a dead cluster whose name must come out escaped in the HTML


class _Now:
    def now(self) -> float:
        return NOW


async def _job_run(db: Path, settings: Settings, port: int) -> list[int]:
    """Start the weekly job as the serve loop does (a start on Monday 09:00: it sends at once), wait for its
    run, deliver the outbox to the SMTP server on `port`; return what each fleet run enqueued."""
    store = SQLiteAlertStore(db)
    clock = _Now()
    fleet = fleet_mailer(settings, store, clock)
    results: list[int] = []
    real = fleet.send_week

    async def counted(week=None):  # type: ignore[no-untyped-def]
        out = await real(week)
        results.append(out.enqueued)
        return out

    fleet.send_week = counted  # type: ignore[method-assign]
    # The cluster report's mailer with no recipients: the job runs it first, and it enqueues nothing.
    cfg = FairnessConfig(send=True)
    mailer = FairnessMailer(
        source=StandIn(), presenter=FairnessPresenter(), outbox=store, clock=clock, cfg=cfg
    )
    scheduler = AsyncIOScheduler()
    schedule_fairness(scheduler, mailer, cfg, now=NOW, fleet=fleet)
    scheduler.start()
    try:
        for _ in range(1200):
            if results:
                break
            await asyncio.sleep(0.05)
        assert results, "the weekly job never sent the fleet report"
        sender = EmailSender(
            host="127.0.0.1",
            port=port,
            sender="watchtower@cluster.example",
            to=["x@x.example"],
            security="none",
            timeout=60,
            deadline=120,
        )
        worker = DeliveryWorker(
            store=store, senders={REPORT_INTEGRATION: sender}, clock=clock, cfg=Settings().alerting
        )
        while store.depth():
            await worker.drain()
            await asyncio.sleep(0.05)
    finally:
        scheduler.shutdown(wait=False)
        store.close()
    return results


def _fleet_settings(engine: str, clusters: list[dict[str, Any]]) -> Settings:
    return settings_from_mapping(
        {
            **FAIRNESS,
            "fleet": {"clusters": clusters, "report": {"prometheus": engine, "recipients": RECIPIENTS}},
        },
        env={},
    )


def _parts(msg: EmailMessage) -> tuple[str, str]:
    text = msg.get_body(("plain",))
    page = msg.get_body(("html",))
    assert text is not None and page is not None
    return text.get_content(), page.get_content()


async def _scenario(tmp: Path, engine: str) -> dict[str, Any]:
    served = {"a": history_of(tmp, "a", speech=True), "b": history_of(tmp, "b", speech=False)}
    token_file = tmp / "token"
    token_file.write_text(TOKEN + "\n")
    app_settings = settings_from_mapping({**FAIRNESS, "server": {"api_token": TOKEN}}, env={})

    def app(store: Any) -> Any:
        c = build_container(
            app_settings, clock=_Now(), source_health=SourceHealth, source_name="test", history=store
        )
        return create_app(c)

    ctl, inbox = plain_smtp_server()
    out: dict[str, Any] = {}
    try:
        async with serve(app(served["a"])) as a, serve(app(served["b"])) as b:
            clusters = [
                {"name": "a", "url": a, "token_file": str(token_file)},
                {"name": "b", "url": b, "token_file": str(token_file)},
                {"name": ODD, "url": f"http://127.0.0.1:{free_port()}"},
            ]
            settings = _fleet_settings(engine, clusters)
            db = tmp / "state.db"
            out["first"] = await _job_run(db, settings, ctl.port)
            out["after_first"] = len(inbox.parsed())
            out["second"] = await _job_run(db, settings, ctl.port)  # a restart in the same week
        out["messages"] = inbox.parsed()
        out["rcpts"] = sorted(r for m in inbox.messages for r in m[1])
    finally:
        ctl.stop()
        for s in served.values():
            s.close()
    return out


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if not have_prometheus():
        pytest.fail("prometheus/promtool not on PATH: run tests/setup/system-deps.sh")
    tmp = tmp_path_factory.mktemp("fleet-send-engine")
    for name, text in {"a": openmetrics(S), "b": without_speech(openmetrics(S))}.items():
        backfill(labelled(text, name), tmp / "engine")
    prom = PrometheusProcess(config="global:\n  scrape_interval: 1m\n", data_dir=tmp / "engine")
    prom.start()
    try:
        yield prom.url
    finally:
        prom.stop()


def test_the_job_mails_the_fleet_report_once_a_week_to_each_address_and_names_a_dead_cluster(
    engine: str, tmp_path: Path
) -> None:
    out = asyncio.run(_scenario(tmp_path, engine))
    assert out["first"] == [2] and out["second"] == [0]
    assert out["after_first"] == 2 and len(out["messages"]) == 2  # the restart sent nothing more
    assert out["rcpts"] == ["lead@x.example", "ops@x.example"]
    for msg in out["messages"]:
        assert msg["Subject"] == f"Fleet fairness report {THE_WEEK}"
        text, page = _parts(msg)
        assert text.startswith(f"Fleet fairness report {THE_WEEK}")
        assert "a: " in text and "b: " in text and "missing" not in text.split(f"{ODD}:")[0]
        assert f"{ODD}: missing: its Watchtower did not answer" in text
        assert "c&amp;&lt;i&gt;" in page and ODD not in page
        assert "speech" in text  # a team of cluster a only is there
        csv = [p for p in msg.iter_attachments() if p.get_filename() == f"fleet-fairness-{THE_WEEK}.csv"]
        assert csv and csv[0].get_content().startswith("team,cluster,")
    assert len({m["Message-ID"] for m in out["messages"]}) == 2


def test_a_dead_engine_is_named_missing_in_the_mail_not_a_crash(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    out = asyncio.run(_scenario(tmp_path, dead))
    assert out["first"] == [2] and out["second"] == [0] and len(out["messages"]) == 2
    text, _ = _parts(out["messages"][0])
    assert f"a: missing: the engine at {dead} could not answer for {THE_WEEK}" in text
    assert f"b: missing: the engine at {dead} could not answer for {THE_WEEK}" in text
    assert f"{ODD}: missing: its Watchtower did not answer" in text
