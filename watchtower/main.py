"""The composition root and the command line: `watchtower check-config | analyze | run | demo`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from prometheus_client import CollectorRegistry

from watchtower.config import ConfigError, Settings, load_settings
from watchtower.container import Container
from watchtower.ports import Clock, ClusterSource, SystemClock

cli = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Watch the GPU job queue of a Kubernetes cluster."
)


def _settings_or_exit(path: Path | None):  # type: ignore[no-untyped-def]
    try:
        return load_settings(path)
    except ConfigError as e:
        typer.echo(f"{e.source}: configuration is not valid:", err=True)
        for p in e.problems:
            typer.echo(f"  {p}", err=True)
        raise typer.Exit(2) from None


@cli.command("check-config")
def check_config(file: Annotated[Path, typer.Argument(help="YAML configuration file")]) -> None:
    """Validate a configuration file; list every problem with its YAML path."""
    s = _settings_or_exit(file)
    tiers = ", ".join(f"{t.name}≥{t.min_priority}" for t in s.tier_policy().tiers)
    typer.echo(f"{file}: OK (tiers: {tiers}; cluster source: {s.cluster.source})")


def _parse_at(at: str | None) -> float:
    if at is None:
        return time.time()
    from datetime import datetime

    try:
        dt = datetime.fromisoformat(at.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(f"{at!r} is not an RFC 3339 time such as 2026-11-29T12:00:00Z") from None
    if dt.tzinfo is None:
        raise typer.BadParameter("give a time zone, e.g. 2026-11-29T12:00:00Z")
    return dt.timestamp()


@cli.command()
def analyze(
    objects: Annotated[
        Path, typer.Option("--objects", help="output of kubectl get pods,events,nodes,... -A -o json")
    ],
    at: Annotated[str | None, typer.Option(help="evaluate as of this RFC 3339 time (default: now)")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table or json")] = "table",
    config: Annotated[
        Path | None, typer.Option(help="configuration file (default: built-in defaults)")
    ] = None,
) -> None:
    """Print the queue a dump describes: waits vs thresholds and why, gangs, preemptions, quota, fragmentation."""
    from watchtower.adapters.kube_decode import DecodeError, ObjectDecoder
    from watchtower.services.analyze import analysis_dict
    from watchtower.services.analyze import analyze as run_analysis
    from watchtower.services.table import render

    if fmt not in ("table", "json"):
        raise typer.BadParameter("--format is table or json")
    settings = _settings_or_exit(config)
    now = _parse_at(at)
    try:
        data = sys.stdin.buffer.read() if str(objects) == "-" else objects.read_bytes()
    except OSError as e:
        typer.echo(f"{objects}: cannot read: {e.strerror}", err=True)
        raise typer.Exit(2) from None
    policy = settings.queue_policy()
    decoder = ObjectDecoder(
        team_label=settings.teams.label,
        keep_labels=frozenset(settings.training.match_labels),
        keep_annotations=frozenset(settings.display.annotations),
    )
    try:
        result = run_analysis(data, policy=policy, decoder=decoder, at=now)
    except DecodeError as e:
        typer.echo(f"{objects}: not a Kubernetes List in JSON: {e}", err=True)
        raise typer.Exit(2) from None
    doc = analysis_dict(result, policy)
    if fmt == "json":
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
    else:
        typer.echo(render(doc), nl=False)


# ---- the live service: composition root ----------------------------------------------------------


def build_container(
    settings: Settings,
    *,
    clock: Clock,
    source_health: Callable[[], Mapping[str, Any]],
    source_name: str,
    registry: CollectorRegistry | None = None,
) -> Container:
    """Return the service's parts wired together: metrics on their own registry, the watcher, settings."""
    from watchtower.adapters.metrics import WatchtowerMetrics
    from watchtower.services.watch import Watcher, feed_health_of

    metrics = WatchtowerMetrics(
        registry=registry if registry is not None else CollectorRegistry(),
        tier_bounds=[b for t in settings.tiers for b in (t.warn_after, t.critical_after)],
        feed_health=lambda: feed_health_of(source_health()),
    )
    watcher = Watcher(settings=settings, clock=clock, metrics=metrics, source_health=source_health)
    return Container(
        settings=settings, clock=clock, watcher=watcher, metrics=metrics, source_name=source_name
    )


def bind(host: str, port: int) -> socket.socket:
    """Return a listening socket on host:port (0: a free port), so the URL is known before serving."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise typer.BadParameter(f"cannot listen on {host}:{port}: {e.strerror}") from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve(container: Container, source: ClusterSource, sock: socket.socket) -> None:
    """Run the feed, the evaluation tick and the HTTP server until interrupted."""
    import uvicorn
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    from watchtower.api.app import create_app

    log = logging.getLogger("watchtower")
    watcher = container.watcher
    scheduler = AsyncIOScheduler()
    watcher.schedule(scheduler)
    scheduler.start()

    def feed_ended(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("the cluster feed stopped: %s", task.exception())

    feed = asyncio.create_task(source.run(on_list=watcher.on_list, on_change=watcher.on_change))
    feed.add_done_callback(feed_ended)
    config = uvicorn.Config(create_app(container), log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    try:
        await server.serve(sockets=[sock])
    finally:
        feed.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await feed
        scheduler.shutdown(wait=False)


def _run_service(settings: Settings, *, host: str, port: int) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # one line per tick is noise
    source: ClusterSource
    clock: Clock
    if settings.cluster.source == "sim":
        from watchtower.adapters.sim.cluster import SimulatedCluster

        sim = SimulatedCluster(settings.simulator)
        source, clock = sim, sim  # simulated time drives waits and thresholds
        container = build_container(settings, clock=clock, source_health=sim.health, source_name="sim")
    else:
        from watchtower.adapters.kube import KubeSource

        clock = SystemClock()
        # The source needs the watcher's decoder (it trims listed objects to what is kept) and the
        # watcher needs the source's health: bind the health probe late.
        container = build_container(
            settings, clock=clock, source_health=lambda: source.health(), source_name="kube"
        )
        source = KubeSource.connect(
            kubeconfig=settings.cluster.kubeconfig,
            context=settings.cluster.context,
            decoder=container.watcher.decoder,
            page_size=settings.cluster.page_size,
            watch_timeout=settings.cluster.watch_timeout,
            clock=clock,
        )
    sock = bind(host, port)
    actual = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"Watchtower ({settings.cluster.source}) serving at http://{shown}:{actual}/", err=False)
    sys.stdout.flush()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(container, source, sock))


@cli.command()
def run(
    config: Annotated[Path, typer.Option(help="YAML configuration file")],
    port: Annotated[int | None, typer.Option(help="listen port (default: server.port)")] = None,
) -> None:
    """Run the service: watch the cluster (settings.cluster.source), serve the API, /metrics and the page."""
    settings = _settings_or_exit(config)
    _run_service(settings, host=settings.server.host, port=settings.server.port if port is None else port)


@cli.command()
def demo(
    port: Annotated[int, typer.Option(help="listen port on 127.0.0.1 (0: a free one)")] = 0,
    seed: Annotated[int | None, typer.Option(help="simulator seed")] = None,
) -> None:
    """Run the service on a simulated cluster with built-in defaults and print the URL."""
    settings = Settings()
    cluster = settings.cluster.model_copy(update={"source": "sim"})
    sim = settings.simulator if seed is None else settings.simulator.model_copy(update={"seed": seed})
    # Simulated time runs `speed` times faster: evaluate often enough that the page moves smoothly.
    queue = settings.queue.model_copy(update={"evaluate_every": 2.0})
    settings = settings.model_copy(update={"cluster": cluster, "simulator": sim, "queue": queue})
    _run_service(settings, host="127.0.0.1", port=port)


if __name__ == "__main__":
    cli()
