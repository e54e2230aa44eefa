"""`watchtower demo`: the whole service on a simulated cluster, with somewhere for its notifications to go.

Started (by `start`), all on 127.0.0.1 and all stopped on the way out: the simulator and its DCGM/KSM
exporter, an SMTP sink and a webhook sink (signatures checked) as the demo receivers, a local Prometheus
scraping the exporter and Watchtower when the `prometheus` binary is installed, and the service itself.
Everything it writes goes to a temporary directory removed at exit.

The run in steps: `settings` (the options and the service's settings for the demo), `start` (the parts
started before the service), then here the service built, its addresses printed, the past week recorded in
the background and the server run until stopped. `DemoOptions` is imported from here by the CLI and tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from watchtower.adapters.demo_sinks import SmtpSink, WebhookSink
from watchtower.api.container import Container
from watchtower.commands.demo.past_week_process import Backfill, past_week_in_background
from watchtower.commands.demo.settings import MAIL_TO, DemoOptions, demo_settings, owner_address
from watchtower.commands.demo.start import Started, open_stores, start_prometheus, start_sinks_and_cluster
from watchtower.config.model import Settings
from watchtower.domain.fairness.week import IsoWeek

# DemoOptions is defined in settings; the CLI, the tests and the benchmarks import it from here with the run.
__all__ = ["DemoOptions", "DemoRun", "run_demo"]


@dataclass
class DemoRun:
    """A running demo, handed to `on_ready` (tests read the sinks and the container through it)."""

    url: str
    container: Container
    sim: Any  # SimulatedCluster
    smtp: SmtpSink
    webhooks: WebhookSink
    prometheus_url: str | None
    api_token: str
    links: dict[str, str] = field(default_factory=dict)


async def run_demo(
    opts: DemoOptions,
    *,
    echo: Callable[[str], object] = print,
    on_ready: Callable[[DemoRun], object] | None = None,
    base: Settings | None = None,
    handle_signals: bool = False,
) -> None:
    """Run the demo until cancelled (or, with `handle_signals`, SIGTERM/SIGINT); every part it started is
    stopped on the way out."""
    from watchtower.bootstrap import build_container
    from watchtower.commands.demo.past_week import past_week_of
    from watchtower.runtime.cluster_name import named_cluster

    base = base or Settings()
    stack = contextlib.AsyncExitStack()
    try:
        started = await start_sinks_and_cluster(opts, base, stack)
        prom, prom_note = await start_prometheus(opts, started, stack)
        settings = demo_settings(
            base,
            opts=opts,
            url=started.url,
            smtp_port=started.smtp.port,
            hook_url=started.webhooks.hook_url,
            secret=started.secret,
            store_path=str(started.workdir / "alerts.db"),
            prometheus_url=prom.url if prom is not None else None,
            api_token=started.token,
        )
        settings = named_cluster(settings, "demo", "the simulator")
        store, history = open_stores(settings, started.workdir, stack)
        links = {"mail and webhook sinks (JSON)": started.webhooks.url}
        if prom is not None:
            links["Prometheus"] = prom.url
        past = past_week_of(settings, started.sim.now()) if opts.past_week and history is not None else None
        if past is not None:
            links[f"fairness report {past}: a simulated past week, recorded at full speed"] = (
                f"{started.url}/reports/fairness/{past}"
            )
        container = build_container(
            settings,
            clock=started.sim,
            source_health=started.sim.feed_health,
            source_name="sim",
            alert_store=store,
            links=links,
            history=history,
        )
        _print_urls(echo, settings, started, prom, prom_note)
        if past is not None:
            echo(f"  past week       {started.url}/reports/fairness/{past} (being simulated at full speed)")
            stack.push_async_callback(_record_past_week(settings, past, opts, started, prom, container, echo))
        await _serve_until_stopped(container, started, prom, links, on_ready, handle_signals)
    finally:
        await stack.aclose()


def _print_urls(
    echo: Callable[[str], object], settings: Settings, started: Started, prom: Any, prom_note: str
) -> None:
    url = started.url
    echo(f"Watchtower demo: a simulated cluster at {settings.simulator.speed:g}x real time")
    echo(f"  status page     {url}/")
    echo(f"  alerts          {url}/api/v1/alerts")
    echo(f"  idle GPUs       {url}/api/v1/gpu/idle")
    echo(f"  Prometheus      {prom.url + '/' if prom is not None else prom_note}")
    echo(f"  SMTP sink       127.0.0.1:{started.smtp.port} (mail to {MAIL_TO})")
    echo(f"  webhook sink    {started.webhooks.hook_url} (Standard Webhooks signatures checked)")
    echo(f"  sinks received  {started.webhooks.url}/")
    echo(
        f"  owner notices   each team's contact: {owner_address('<team>')} (the last team: the webhook sink)"
    )
    echo(f"  API token       {started.token} (Authorization: Bearer …, to create silences)")


def _record_past_week(
    settings: Settings,
    past: IsoWeek,
    opts: DemoOptions,
    started: Started,
    prom: Any,
    container: Container,
    echo: Callable[[str], object],
) -> Callable[[], Any]:
    """Start recording the simulated past week in the background (its metrics backfilled into `prom` when
    there is one), its report built ahead once recorded; return what stops it."""
    backfill = (
        Backfill(
            prom,
            started.workdir,
            exporter=f"127.0.0.1:{started.exporter.port}",
            watchtower=f"127.0.0.1:{started.port}",
        )
        if prom is not None
        else None
    )
    reports = container.fairness
    sim = started.sim

    async def warm() -> None:
        # The first build asks Prometheus for the week (half a minute for a busy one) and keeps its
        # settled answer: the page opens at once when "ready" is printed.
        if reports is not None:
            await reports.build(past, now=sim.now())

    async def keep(settled: float) -> None:
        # A day of the past week is in blocks: Prometheus loads them, and that day's answers are
        # asked while the next is recorded, so that the report waits only for the last.
        from watchtower.adapters.prometheus.fairness import PrometheusFairness

        usage = reports.metrics if reports is not None else None
        if backfill is None or not isinstance(usage, PrometheusFairness):
            return
        await asyncio.to_thread(backfill.prom.restart)
        start, end = past.bounds(zoneinfo.ZoneInfo(settings.fairness.timezone))
        await asyncio.to_thread(usage.keep_settled, start, end, settings.fairness.step, settled)

    async def replay_it(recorded: Any) -> None:
        from watchtower.commands.demo.replay import offer_replay

        page = await offer_replay(container, settings, str(past), recorded.trace)
        if page is not None:
            echo(
                f"  past week       {past}: its replay (the demo's policy and one more) at {started.url}{page}"
            )

    return past_week_in_background(
        settings, past, echo, backfill, span=opts.past_week_span, warm=warm, keep=keep, on_recorded=replay_it
    )


async def _serve_until_stopped(
    container: Container,
    started: Started,
    prom: Any,
    links: dict[str, str],
    on_ready: Callable[[DemoRun], object] | None,
    handle_signals: bool,
) -> None:
    """Serve until cancelled (or a signal, with `handle_signals`); `on_ready` is handed the running demo
    once the server accepts connections."""
    from watchtower.runtime.serve import serve

    sim = started.sim
    accepting = asyncio.Event()
    serving = asyncio.create_task(
        serve(container, sim, started.sock, started=accepting, handle_signals=handle_signals)
    )
    try:
        waiter = asyncio.create_task(accepting.wait())
        await asyncio.wait({serving, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if accepting.is_set() and on_ready is not None:
            on_ready(
                DemoRun(
                    url=started.url,
                    container=container,
                    sim=sim,
                    smtp=started.smtp,
                    webhooks=started.webhooks,
                    prometheus_url=prom.url if prom is not None else None,
                    api_token=started.token,
                    links=links,
                )
            )
        await serving
    finally:
        if not serving.done():
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
