"""The serve loop: the feed, the evaluation tick, the leader election and the leader's jobs, the scheduler
and the HTTP server, run together until SIGTERM/SIGINT or cancellation, and stopped in order."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any

from watchtower.adapters.scheduled_jobs import ScheduledJobs
from watchtower.api.container import Container
from watchtower.bootstrap import estimate_recorder, fairness_recorder, loop_lag_recorder, replay_recorder
from watchtower.ports import ClusterSource
from watchtower.runtime.config_reload import config_reloader
from watchtower.runtime.delivery import wire_delivery
from watchtower.runtime.leader_jobs import DELIVERY, leader_jobs
from watchtower.runtime.loop_lag import LoopLagMonitor
from watchtower.runtime.stopping import Stopping
from watchtower.runtime.tick_loop import TickLoop
from watchtower.services.alerting import DeliveryWorker
from watchtower.services.fairness_send import REPORT_INTEGRATION
from watchtower.services.leadership import LeaderElector
from watchtower.services.owner_outbox import owner_lanes
from watchtower.services.queue_tracker import QueueTracker

log = logging.getLogger("watchtower")

SHUTDOWN_GRACE = 10.0
RELEASE_TIMEOUT = 3.0  # seconds the Lease's release may take on the way out; it expires by itself anyway


async def serve(
    container: Container,
    source: ClusterSource,
    sock: socket.socket,
    *,
    started: asyncio.Event | None = None,
    side_feeds: Sequence[tuple[str, Callable[[QueueTracker], Coroutine[Any, Any, None]]]] = (),
    config_path: str | Path | None = None,
    handle_signals: bool = False,
) -> None:
    """Run the feed, the evaluation tick, the leader election (when on), the leader's jobs, the event-loop
    lag monitor and the HTTP server until SIGTERM/SIGINT (with `handle_signals`) or cancellation; with
    `config_path`, reload that file when it changes (`server.config_reload_every`).

    The way out, in order: no new work (no tick, no grouping, no new send); the sends under way get
    `server.shutdown_deadline` (none when cancelled) and what is left stays due in the outbox; the Lease is
    released, so a follower takes over at once; the HTTP server and the rest stop. The alert store belongs
    to whoever opened it. `started` is set once the server accepts connections.
    """
    import httpx
    import uvicorn

    from watchtower.adapters.senders import build_senders
    from watchtower.api.app import create_app

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # The signals are the runtime's (`Stopping`): uvicorn's own handling would stop the
            # server first and re-raise them afterwards, racing the orderly way out.
            yield

    settings = container.settings
    fence = container.leadership
    elector = fence if isinstance(fence, LeaderElector) else None
    http = httpx.AsyncClient()
    tasks: list[asyncio.Task[None]] = []
    leading: dict[str, asyncio.Task[None]] = {}

    def ended(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("%s stopped: %s", task.get_name(), task.exception())

    def spawn(coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        t = asyncio.create_task(coro, name=name)
        t.add_done_callback(ended)
        tasks.append(t)
        return t

    recorders = (fairness_recorder(container), replay_recorder(container), estimate_recorder(container))
    loop = TickLoop(container, extra=[r.on_tick for r in recorders if r is not None])
    container.queue_tracker.on_listed = loop.kick
    scheduler = ScheduledJobs()
    if (record_lag := loop_lag_recorder(container)) is not None:
        spawn(LoopLagMonitor(record_lag).run(), "the event-loop lag monitor")
    alerting = container.alerting
    delivery = wire_delivery(container, scheduler, http)
    worker = delivery.worker if delivery is not None else None
    report_sender = delivery.report_sender if delivery is not None else None
    owner_sender = delivery.owner_sender if delivery is not None else None
    routers = [delivery.router] if delivery is not None else []
    if config_path is not None and settings.server.config_reload_every > 0:
        reloader = config_reloader(
            container,
            config_path,
            worker=worker,
            # A reload keeps the weekly report's sender beside the alert senders it rebuilds.
            senders=lambda cfg: {
                **build_senders(cfg, http=http, cluster_label=container.settings.cluster.label),
                **({REPORT_INTEGRATION: report_sender} if report_sender is not None else {}),
                **(owner_lanes(owner_sender) if owner_sender is not None else {}),
            },
        )
        spawn(reloader.run(settings.server.config_reload_every), "configuration reload")
    jobs = leader_jobs(container, worker)

    def lead(now_leading: bool) -> None:
        for t in leading.values():
            t.cancel()
        leading.clear()
        if not now_leading or loop.stopped:
            return
        if elector is not None and alerting is not None:
            alerting.lead()  # another replica may have led: start from what the store holds
        for name, job in jobs:
            leading[name] = spawn(job(), name)

    stopping = Stopping() if handle_signals else None
    if stopping is not None:
        stopping.install()
    app = create_app(container, routers=routers)
    loop.schedule(scheduler)
    scheduler.start()
    w = container.queue_tracker
    spawn(source.run(on_list=w.on_list, on_change=w.on_change), "the cluster feed")
    for name, feed in side_feeds:
        spawn(feed(w), name)
    election = None
    if elector is not None:
        elector.on_change = lead
        election = spawn(elector.run(), "leader election")
    else:
        lead(True)
    server = Server(
        uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=2
        )
    )

    async def announce() -> None:
        while not server.started:
            await asyncio.sleep(0.02)
        if started is not None:
            started.set()

    spawn(announce(), "start-up notice")
    serving = asyncio.create_task(server.serve(sockets=[sock]), name="the HTTP server")
    asked = asyncio.create_task(stopping.requested.wait()) if stopping is not None else None
    graceful = False
    try:
        await asyncio.wait(
            [t for t in (serving, asked) if t is not None], return_when=asyncio.FIRST_COMPLETED
        )
        graceful = True
    finally:
        if asked is not None:
            asked.cancel()
        loop.stopped = True
        await scheduler.stop()
        for name, t in leading.items():
            if name != DELIVERY:
                t.cancel()
        delivering = leading.get(DELIVERY)
        if worker is not None and delivering is not None:
            deadline = settings.server.shutdown_deadline if graceful else 0.0
            await _finish_sends(
                worker, delivering, deadline, stopping.hurry if stopping is not None else None
            )
        if election is not None and elector is not None:
            election.cancel()
            await asyncio.wait([election], timeout=RELEASE_TIMEOUT)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(elector.release(), timeout=RELEASE_TIMEOUT)
        server.should_exit = True
        await asyncio.wait([serving], timeout=SHUTDOWN_GRACE)
        tasks.append(serving)
        for t in tasks:
            t.cancel()
        # A part that ignores its cancellation must not keep the process from exiting: wait a while, name
        # it, and go on.
        if tasks:
            _, stuck = await asyncio.wait(tasks, timeout=SHUTDOWN_GRACE)
            for t in stuck:
                log.warning(
                    "%s did not stop within %g s of shutdown; leaving it", t.get_name(), SHUTDOWN_GRACE
                )
        await http.aclose()
        if elector is not None:
            elector.close()
        if container.gpu is not None:
            container.gpu.reader.close()
        if container.replays is not None:
            container.replays.close()
        if stopping is not None:
            stopping.remove()
    if serving.done() and not serving.cancelled() and (e := serving.exception()) is not None:
        raise e


async def _finish_sends(
    worker: DeliveryWorker, task: asyncio.Task[None], deadline: float, hurry: asyncio.Event | None
) -> None:
    """Let the sends under way finish within `deadline` (or until `hurry`); cut the rest short, which
    leaves them due in the outbox for whoever leads next, under the same idempotency keys."""
    worker.stop()
    waits: list[asyncio.Future[Any]] = [task]
    hurried = asyncio.ensure_future(hurry.wait()) if hurry is not None else None
    if hurried is not None:
        waits.append(hurried)
    if deadline > 0 and not task.done():
        await asyncio.wait(waits, timeout=deadline, return_when=asyncio.FIRST_COMPLETED)
    if hurried is not None:
        hurried.cancel()
    if not task.done():
        if worker.sending:
            log.warning(
                "%d notification(s) still being sent at shutdown: left in the outbox for the next leader",
                worker.sending,
            )
        task.cancel()
        await asyncio.wait([task], timeout=SHUTDOWN_GRACE)
