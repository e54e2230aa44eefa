"""What the demo starts before the service is built, each part stopped by the run's exit stack: a
temporary directory, the SMTP and webhook sinks, the simulated cluster and its exporter, the listening socket,
the local Prometheus (when installed), the alert store and fairness history in one SQLite file."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchtower.adapters.demo_sinks import SmtpSink, WebhookSink, new_secret
from watchtower.commands.demo.settings import SCRAPE_EVERY, DemoOptions, demo_simulator
from watchtower.config.model import Settings
from watchtower.ports import AlertStore, FairnessHistory

WEEK = 7 * 86400.0
# The demo's Prometheus: an instant selector sees a series this long after its last sample. Backfilled
# samples (every fairness.step, 5 minutes by default) have no staleness markers: with Prometheus' default
# of 5 minutes a pod gone at one step would still be counted at the next. Live scrapes (every 2 s, with
# staleness markers) are not affected.
BACKFILL_LOOKBACK = 240.0


@dataclass
class Started:
    """What the demo has started before the service is built: its files, sinks, simulator and socket."""

    workdir: Path
    secret: str  # the webhook sink's signing secret
    token: str  # the API token printed for creating silences
    smtp: SmtpSink
    webhooks: WebhookSink
    sim: Any  # SimulatedCluster
    exporter: Any  # the simulator's DCGM/KSM exporter
    sock: socket.socket
    port: int
    url: str


async def start_sinks_and_cluster(
    opts: DemoOptions, base: Settings, stack: contextlib.AsyncExitStack
) -> Started:
    """Start the SMTP and webhook sinks, the simulated cluster's exporter and the listening socket, each
    stopped by `stack`; return them with the temporary directory, the webhook secret and the API token."""
    from watchtower.commands.demo.warm import demo_cluster
    from watchtower.runtime.sockets import bind

    workdir = Path(tempfile.mkdtemp(prefix="watchtower-demo-"))
    secret = new_secret()
    token = secrets.token_urlsafe(18)
    stack.callback(shutil.rmtree, workdir, True)
    smtp = SmtpSink().start()
    stack.callback(smtp.stop)
    sim_cfg = base.simulator.model_copy(
        update={
            **demo_simulator(base.simulator),
            **{k: v for k, v in (("seed", opts.seed), ("speed", opts.speed)) if v is not None},
        }
    )
    sim = demo_cluster(sim_cfg)
    # The sender signs with the cluster's clock (simulated here): the sink checks against the same.
    webhooks = WebhookSink(secret=secret, now=sim.now, smtp=smtp).start()
    stack.callback(webhooks.stop)
    exporter = await sim.serve_metrics("127.0.0.1", 0)
    stack.push_async_callback(exporter.close)
    sock = bind("127.0.0.1", opts.port)
    stack.callback(sock.close)
    port = sock.getsockname()[1]
    return Started(
        workdir=workdir,
        secret=secret,
        token=token,
        smtp=smtp,
        webhooks=webhooks,
        sim=sim,
        exporter=exporter,
        sock=sock,
        port=port,
        url=f"http://127.0.0.1:{port}",
    )


async def start_prometheus(
    opts: DemoOptions, started: Started, stack: contextlib.AsyncExitStack
) -> tuple[Any, str]:
    """Start the local Prometheus (when asked and installed), stopped by `stack`; return it (None when not
    started) and, when not, the words saying why."""
    from watchtower.adapters.prometheus.process import (
        INSTALL_HINT,
        LocalPrometheusError,
        start_local_prometheus,
    )

    if not opts.prometheus:
        return None, "not started (--no-prometheus)"
    prom = None
    prom_note = ""
    try:
        prom = await asyncio.to_thread(
            start_local_prometheus,
            exporter_port=started.exporter.port,
            watchtower_port=started.port,
            scrape_interval=SCRAPE_EVERY,
            # The past week's blocks (simulated time) may be months older than the live samples
            # (real time): kept for that long and a week, whatever the machine's clock says.
            retention=max(15 * 86400.0, time.time() - started.sim.now()) + 2 * WEEK,
            lookback_delta=BACKFILL_LOOKBACK,
        )
    except LocalPrometheusError as e:
        prom_note = f"did not start ({str(e)[:300]})"
    if prom is not None:
        stack.callback(prom.stop)
    elif not prom_note:
        prom_note = "not started: " + INSTALL_HINT
    return prom, prom_note


def open_stores(
    settings: Settings, workdir: Path, stack: contextlib.AsyncExitStack
) -> tuple[AlertStore, FairnessHistory | None]:
    """Open the demo's alert store and, in the same file, its fairness history; both closed by `stack`."""
    from watchtower.adapters.store.sqlite import SQLiteAlertStore
    from watchtower.bootstrap import open_history

    store = SQLiteAlertStore(workdir / "alerts.db")
    stack.callback(store.close)
    history = open_history(settings, store)  # the fairness history, in the same file
    if history is not None:
        stack.callback(history.close)
    return store, history
