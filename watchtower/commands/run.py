"""`watchtower run`: the cluster the settings name (or the simulator), served until interrupted."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchtower.adapters.clock import SystemClock
from watchtower.adapters.process_runtime import limit_malloc_arenas, loop_factory
from watchtower.bootstrap import (
    StartupError,
    StoreUnavailable,
    build_container,
    leader_elector,
    object_decoder,
    open_alert_store,
    open_history,
    store_location,
)
from watchtower.config.model import Settings
from watchtower.domain.health import SourceHealth
from watchtower.ports import AlertStore, Clock, ClusterSource, FairnessHistory, Fence
from watchtower.runtime.cluster_name import named_cluster
from watchtower.runtime.logs import configure_logging
from watchtower.runtime.serve import serve
from watchtower.runtime.sockets import bind, reachable_at, served_url
from watchtower.services.queue_tracker import QueueTracker

if TYPE_CHECKING:
    from watchtower.adapters.store.url import StoreLocation

log = logging.getLogger("watchtower")


def run_service(
    settings: Settings,
    *,
    host: str,
    port: int,
    echo: Callable[[str], object],
    config_path: str | Path | None = None,
) -> None:
    """Run `watchtower run`: the cluster the settings name (or the simulator) until interrupted.

    Raises StartupError when there is no cluster to watch, OSError when the port cannot be had.
    """
    configure_logging()
    limit_malloc_arenas()  # before any thread starts: a thread's arena is made at its first malloc
    source: ClusterSource
    clock: Clock
    health: Callable[[], SourceHealth]
    leadership: Fence | None = None
    side_feeds: list[tuple[str, Callable[[QueueTracker], Coroutine[Any, Any, None]]]] = []
    decoder = object_decoder(settings)
    if settings.leader_election.enabled and settings.cluster.source != "kube":
        raise StartupError("leader_election needs cluster.source kube: the Lease lives on the API server")
    if settings.cluster.source == "sim":
        from watchtower.commands.demo.warm import demo_cluster

        sim = demo_cluster(settings.simulator)
        # Simulated time drives waits and thresholds.
        source, clock, health = sim, sim, sim.feed_health
        settings = named_cluster(settings, "demo", "the simulator")
    else:
        from watchtower.adapters.kube import KubeConfigError, KubeSource

        clock = SystemClock()
        try:
            kube = KubeSource.connect(
                kubeconfig=settings.cluster.kubeconfig,
                context=settings.cluster.context,
                decoder=decoder,
                page_size=settings.cluster.page_size,
                watch_timeout=settings.cluster.watch_timeout,
                stale_limit=settings.cluster.stale_after,
                clock=clock,
            )
        except KubeConfigError as e:
            raise StartupError(str(e)) from None
        source, health = kube, kube.feed_health
        if kube.cluster_name is not None:
            settings = named_cluster(settings, kube.cluster_name.name, kube.cluster_name.origin)
        from watchtower.adapters.kube.visibility import KueueVisibility

        visibility = KueueVisibility(kube.transport, decoder, clock=clock)
        side_feeds.append(
            (
                "Kueue queue positions",
                lambda w: visibility.run(queues=w.kueue_waiting_queues, on_positions=w.on_kueue_positions),
            )
        )
        if settings.leader_election.enabled:
            leadership = leader_elector(settings, kube.transport.client)
    # Bound before anything is built: the links in alerts and on the pages use the port actually had.
    sock = bind(host, port)
    url = served_url(host, sock)
    settings = reachable_at(settings, url)
    # Opened once the cluster is known to be reachable in principle: a failed start leaves no database.
    # The store's URL is resolved once, here: both openers are handed where it is.
    where = store_location(settings) if settings.alerting.enabled or settings.fairness.enabled else None
    store, history = _open_stores(settings, where)
    try:
        container = build_container(
            settings,
            clock=clock,
            source_health=health,
            source_name=settings.cluster.source,
            alert_store=store,
            decoder=decoder,
            leadership=leadership,
            history=history,
        )
        echo(f"Watchtower ({settings.cluster.source}) serving at {url}/")
        if settings.server.api_token is None:
            # The install's Secret is optional: say at start why a silence cannot be created, not only on
            # the first refused request.
            log.warning(
                "changes through the API (silences) are disabled: no server.api_token is configured"
                " (WATCHTOWER_SERVER__API_TOKEN or server.api_token_file)"
            )
        # A signal before serve() takes the signals over ends the start like Ctrl-C.
        with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(
                serve(
                    container,
                    source,
                    sock,
                    side_feeds=side_feeds,
                    config_path=config_path,
                    handle_signals=True,
                )
            )
    finally:
        sock.close()
        if history is not None:
            history.close()
        if store is not None:
            store.close()


def _open_stores(
    settings: Settings, where: StoreLocation | None
) -> tuple[AlertStore | None, FairnessHistory | None]:
    """Open the alert store and the fairness history, trying again while PostgreSQL cannot be reached or
    drops the connection (a restart, a failover, a cut mid-migration: the migration's one transaction is
    rolled back whole) for `store.start_wait`, so the service comes up once the database is back instead
    of exiting for Kubernetes to restart it. A refusal (wrong password, no such database, a newer schema)
    is no reason to wait: it raises at once."""
    deadline = time.monotonic() + settings.store.start_wait
    pause = 1.0
    while True:
        store: AlertStore | None = None
        try:
            store = open_alert_store(settings, where)
            return store, open_history(settings, store, where=where)
        except StoreUnavailable as e:
            if store is not None:
                store.close()
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            wait = min(pause, left)
            log.warning("%s; trying again in %.0f s (giving up in %.0f s: store.start_wait)", e, wait, left)
            time.sleep(wait)
            pause = min(pause * 2, 10.0)
