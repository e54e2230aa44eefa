"""Sending the weekly fairness report: once per ISO week per recipient, through the alert outbox.

Each address gets one email a week, keyed `fairness:<week>:<address>`. The key is recorded in the state
store in the same transaction as the outbox row, so the job firing twice, a restart or a second run of
`watchtower report fairness --send` enqueues nothing new. Delivery is the outbox's: retried with backoff,
never lost; a crash mid-send resends that one message once, with the same Message-ID.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

from prometheus_client import CollectorRegistry, Counter

from watchtower.config.fairness import FairnessConfig
from watchtower.domain.alerts.outbox import OutboxMessage
from watchtower.domain.fairness.mail import ReportMail
from watchtower.domain.fairness.recipients import parse_addresses, report_recipients, send_key
from watchtower.domain.fairness.report import FairnessReport
from watchtower.domain.fairness.week import IsoWeek
from watchtower.domain.records import Namespace
from watchtower.ports import Clock, ReportOutbox, ReportPresenter, ReportSource

log = logging.getLogger(__name__)

# The outbox integration the reports go through: apart from the alert integrations, so a week's reports
# never wait behind a storm's notifications, nor these behind them.
REPORT_INTEGRATION = "fairness-report/email/0"
REPORTS_ENQUEUED = "watchtower_fairness_reports_enqueued_total"
RECIPIENTS_SKIPPED = "watchtower_fairness_report_recipients_skipped_total"


class FairnessSendMetrics:
    def __init__(self, *, registry: CollectorRegistry) -> None:
        self.enqueued = Counter(REPORTS_ENQUEUED, "Weekly fairness report emails enqueued", registry=registry)
        self.skipped = Counter(
            RECIPIENTS_SKIPPED,
            "Report recipients skipped: an address in a namespace annotation that is not one",
            ["reason"],
            registry=registry,
        )


@dataclass(frozen=True, slots=True)
class SendOutcome:
    week: str
    enqueued: int
    already_sent: int
    recipients: tuple[str, ...]
    skipped: tuple[str, ...] = field(default=())  # "<namespace>: <address>" refused


async def fetch_report(source: ReportSource, week: IsoWeek, team: str | None) -> FairnessReport:
    """Return the report from a source that may answer at once or be awaited."""
    got = source(week, team)
    return await got if inspect.isawaitable(got) else got


def last_complete_week(now: float, timezone: str) -> IsoWeek:
    """Return the ISO week before the one `now` falls in, in `timezone`: the newest complete week."""
    return IsoWeek.containing(now, ZoneInfo(timezone)).previous()


class FairnessMailer:
    """Enqueues a week's report emails: the whole report to the platform list, each team's to its own."""

    def __init__(
        self,
        *,
        source: ReportSource,
        presenter: ReportPresenter,
        outbox: ReportOutbox,
        clock: Clock,
        cfg: FairnessConfig,
        namespaces: Callable[[], Mapping[str, Namespace]] = dict,
        page_url: Callable[[str], str] | None = None,
        metrics: FairnessSendMetrics | None = None,
        on_enqueued: Callable[[], None] | None = None,
    ) -> None:
        self.source, self.presenter, self.outbox, self.clock = source, presenter, outbox, clock
        self.cfg, self.namespaces, self.page_url = cfg, namespaces, page_url
        self.metrics, self.on_enqueued = metrics, on_enqueued

    def _annotated(self, report: FairnessReport) -> tuple[dict[str, list[str]], list[str]]:
        """Return team → valid addresses from its namespaces' annotation, and the refused ones."""
        known = self.namespaces()
        out: dict[str, list[str]] = {}
        refused: list[str] = []
        for t in report.teams:
            for ns in t.namespaces:
                n = known.get(ns)
                if n is None or not n.report_to:
                    continue
                good, bad = parse_addresses(n.report_to)
                out.setdefault(t.team, []).extend(a for a in good if a not in out.get(t.team, []))
                refused += [f"{ns}: {a}" for a in bad]
        return out, refused

    async def send_week(self, week: IsoWeek | None = None) -> SendOutcome:
        """Enqueue the report of `week` (default: the last complete one) to every recipient not yet sent it.

        Raises whatever the report source raises (Prometheus unreachable, ...): nothing is recorded then,
        and the next run tries again."""
        now = self.clock.now()
        week = week or last_complete_week(now, self.cfg.timezone)
        w = str(week)
        report = await fetch_report(self.source, week, None)
        annotated, refused = self._annotated(report)
        for bad in refused:
            # The address is the namespace owner's text: logged with repr, so it is one inert line.
            log.warning("fairness report %s: skipped a recipient that is no email address: %r", w, bad)
            if self.metrics is not None:
                self.metrics.skipped.labels("invalid_address").inc()
        recipients = report_recipients(
            teams=[t.team for t in report.teams],
            platform=self.cfg.platform_recipients,
            configured=self.cfg.team_recipients,
            annotated=annotated,
        )
        keys = {r.address: send_key(w, r.address) for r in recipients}
        done = await asyncio.to_thread(self.outbox.recorded, keys.values())
        todo = [r for r in recipients if keys[r.address] not in done]
        footer = f"The page: {self.page_url(w)}" if self.page_url is not None else ""
        rendered: dict[tuple[str, ...] | None, ReportMail] = {}
        messages = []
        for r in todo:
            key = keys[r.address]
            base = rendered.get(r.teams)
            if base is None:
                # One rendering per audience: the addresses of one team share its charts and CSV.
                base = rendered[r.teams] = await asyncio.to_thread(
                    self.presenter.mail, report, to=[r.address], teams=r.teams, key=key, footer=footer
                )
            mail = dataclasses.replace(base, to=(r.address,), message_id_key=key)
            messages.append(
                OutboxMessage(
                    id=0,
                    key=key,
                    integration=REPORT_INTEGRATION,
                    group_key=f"fairness:{w}",
                    payload=mail.to_payload(),
                    created=now,
                    next_attempt=now,
                )
            )
        n = await asyncio.to_thread(self.outbox.enqueue_once, messages, now) if messages else 0
        if n:
            log.info("fairness report %s: %d email(s) enqueued", w, n)
            if self.metrics is not None:
                self.metrics.enqueued.inc(n)
            if self.on_enqueued is not None:
                self.on_enqueued()
        return SendOutcome(
            week=w,
            enqueued=n,
            already_sent=len(recipients) - n,
            recipients=tuple(r.address for r in recipients),
            skipped=tuple(refused),
        )
