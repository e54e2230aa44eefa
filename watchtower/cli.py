"""The command line: `watchtower check-config | analyze | generate | run | demo | replay | report fairness`. It parses
arguments and calls what each command runs (watchtower.commands); nothing imports it.

Size: every command's options are declared here, typer's way, one parameter of several lines each; the
work behind them is in watchtower.commands, so what is left is declarations."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from watchtower.config import ConfigError, load_settings, read_settings

cli = typer.Typer(add_completion=False, no_args_is_help=True)


def _version(value: bool) -> None:
    if not value:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("watchtower")
    except PackageNotFoundError:  # run from a checkout that was never installed
        v = "unknown (not installed)"
    typer.echo(f"watchtower {v}")
    raise typer.Exit(0)


@cli.callback()
def main(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", callback=_version, is_eager=True),
    ] = False,
) -> None:
    """Watch the GPU job queue of a Kubernetes cluster."""


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
    """Validate a configuration file; list every problem with its YAML path (exit 2), warnings on stderr."""
    try:
        s, warnings = read_settings(file)
    except ConfigError as e:
        for w in e.warnings:
            typer.echo(f"{e.source}: warning: {w}", err=True)
        n = len(e.problems)
        typer.echo(f"{e.source}: configuration is not valid, {n} problem{'s' if n > 1 else ''}:", err=True)
        for p in e.problems:
            typer.echo(f"  {p}", err=True)
        raise typer.Exit(2) from None
    for w in warnings:
        typer.echo(f"{file}: warning: {w}", err=True)
    tiers = ", ".join(f"{t.name}≥{t.min_priority}" for t in s.tier_policy().tiers)
    typer.echo(f"{file}: OK (tiers: {tiers}; cluster source: {s.cluster.source})")


def _parse_at(at: str | None) -> float | None:
    if at is None:
        return None
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
    at: Annotated[
        str | None,
        typer.Option(help="evaluate as of this RFC 3339 time (default: the newest time in the dump)"),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="table or json")] = "table",
    config: Annotated[
        Path | None, typer.Option(help="configuration file (default: built-in defaults)")
    ] = None,
) -> None:
    """Print the queue a dump describes: waits vs thresholds and why, gangs, preemptions, quota, fragmentation."""
    from watchtower.adapters.kube.decoder import DecodeError
    from watchtower.commands.analyze import analyze_dump, as_json, as_table

    if fmt not in ("table", "json"):
        raise typer.BadParameter("--format is table or json")
    settings = _settings_or_exit(config)
    chosen = _parse_at(at)
    try:
        data = sys.stdin.buffer.read() if str(objects) == "-" else objects.read_bytes()
    except OSError as e:
        typer.echo(f"{objects}: cannot read: {e.strerror}", err=True)
        raise typer.Exit(2) from None
    try:
        doc, warning = analyze_dump(data, settings, at=chosen, now=time.time())
    except DecodeError as e:
        typer.echo(f"{objects}: not a Kubernetes List in JSON: {e}", err=True)
        raise typer.Exit(2) from None
    if warning is not None:
        typer.echo(warning, err=True)
    if fmt == "json":
        sys.stdout.buffer.write(as_json(doc))
    else:
        typer.echo(as_table(doc, shutil.get_terminal_size((120, 24)).columns), nl=False)


@cli.command()
def generate(
    config: Annotated[
        Path | None, typer.Option(help="configuration file (default: built-in defaults)")
    ] = None,
    out: Annotated[
        Path, typer.Option(help="root the files are written under, as alerts/... and dashboards/...")
    ] = Path("."),
    check: Annotated[
        bool, typer.Option("--check", help="write nothing; exit 1 naming each file that would change")
    ] = False,
    grafana_datasource_uid: Annotated[
        str | None,
        typer.Option(help="UID of the Prometheus data source in Grafana's alert rules (default: prometheus)"),
    ] = None,
    fleet: Annotated[
        bool,
        typer.Option(
            "--fleet",
            help="fleet mode (as artefacts.fleet): keep the cluster label (cluster.label) in every rule and "
            "panel, a cluster variable on every dashboard; write them elsewhere with --out",
        ),
    ] = False,
) -> None:
    """Write every artefact users import: dashboards, Prometheus and Grafana alert rules, promtool tests,
    the Alertmanager configuration."""
    from dataclasses import replace

    from watchtower.commands.generate import Options, drifted, fleet_mode, render, write

    settings = _settings_or_exit(config)
    if fleet:
        settings = fleet_mode(settings)
    options = Options(source=str(config or ""))
    if grafana_datasource_uid:
        options = replace(options, grafana_datasource_uid=grafana_datasource_uid)
    try:
        files = render(settings, options)
    except ValueError as e:
        typer.echo(f"watchtower generate: {config or 'the defaults'}: {e}", err=True)
        raise typer.Exit(2) from None
    if check:
        stale = drifted(files, out)
        for path in stale:
            typer.echo(f"out of date: {path} (run watchtower generate)", err=True)
        raise typer.Exit(1 if stale else 0)
    for path in write(files, out):
        typer.echo(f"wrote {path}")


@cli.command()
def run(
    config: Annotated[Path, typer.Option(help="YAML configuration file")],
    port: Annotated[
        int | None, typer.Option(min=0, max=65535, help="listen port (default: server.port; 0: a free one)")
    ] = None,
) -> None:
    """Run the service: watch the cluster (settings.cluster.source), serve the API, /metrics and the page."""
    from watchtower.bootstrap import StartupError
    from watchtower.commands.run import run_service

    settings = _settings_or_exit(config)
    stop_on_sigterm()
    try:
        run_service(
            settings,
            host=settings.server.host,
            port=settings.server.port if port is None else port,
            echo=_echo,
            config_path=config,
        )
    except StartupError as e:
        typer.echo(f"watchtower: {e}", err=True)
        raise typer.Exit(2) from None
    except OSError as e:
        if "cannot listen" not in str(e):
            raise
        raise typer.BadParameter(str(e).split("] ", 1)[-1]) from None


@cli.command()
def demo(
    port: Annotated[int, typer.Option(min=0, max=65535, help="listen port on 127.0.0.1 (0: a free one)")] = 0,
    seed: Annotated[int | None, typer.Option(help="simulator seed")] = None,
    prometheus: Annotated[
        bool, typer.Option(help="start a local Prometheus when the binary is installed")
    ] = True,
    past_week: Annotated[
        bool,
        typer.Option(help="simulate the last complete week at full speed, for its fairness report"),
    ] = True,
) -> None:
    """Run the service on a simulated cluster with mail and webhook sinks (and Prometheus); print the URLs."""
    from watchtower.commands.demo.run import DemoOptions, run_demo
    from watchtower.runtime.logs import configure_logging

    configure_logging()
    stop_on_sigterm()
    opts = DemoOptions(port=port, seed=seed, prometheus=prometheus, past_week=past_week)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(run_demo(opts, echo=_echo, handle_signals=True))
    except OSError as e:
        if "cannot listen" not in str(e):
            raise
        raise typer.BadParameter(str(e).split("] ", 1)[-1]) from None


@cli.command()
def replay(
    policy: Annotated[
        list[Path] | None,
        typer.Option("--policy", help="policy file (YAML or JSON); repeat it to compare policies"),
    ] = None,
    trace: Annotated[
        Path | None, typer.Option(help="trace: CSV with a header, or JSON lines (docs/replay.md)")
    ] = None,
    week: Annotated[
        str | None, typer.Option(help="a week the service recorded (2026-W47), replayed from the store")
    ] = None,
    export: Annotated[
        str | None, typer.Option(help="write a recorded week (2026-W47) as a trace: --format csv or jsonl")
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="text, json, csv or html (--export: csv or jsonl)")
    ] = "text",
    out: Annotated[Path | None, typer.Option(help="write to this file (default: standard output)")] = None,
    config: Annotated[
        Path | None, typer.Option(help="configuration file naming the store (--week, --export)")
    ] = None,
) -> None:
    """Replay a week of jobs under each policy: per tier and team waits, preemptions, GPU-hours lost,
    utilisation and fairness, the observed run (when the trace has `started`) beside each policy's."""
    from watchtower.bootstrap import StartupError
    from watchtower.commands.replay import EXPORT_FORMATS, FORMATS, export_week, run_replay, run_week
    from watchtower.services.replay import ReplayInputError

    def fail(message: str) -> NoReturn:
        typer.echo(f"watchtower replay: {message}", err=True)
        raise typer.Exit(2)

    given = [
        name for name, v in (("--trace", trace), ("--week", week), ("--export", export)) if v is not None
    ]
    if len(given) > 1:
        fail(f"give one of --trace, --week and --export, not {' and '.join(given)}")
    if export is not None:
        fmt = "csv" if fmt == "text" else fmt
        if fmt not in EXPORT_FORMATS:
            fail(f"--export writes --format {' or '.join(EXPORT_FORMATS)}")
    elif fmt not in FORMATS:
        fail(f"--format is one of {', '.join(FORMATS)}")
    if trace is None and week is None and export is None:
        fail("give --trace FILE, or --week WEEK for a week the service recorded")
    try:
        if export is not None:
            body = export_week(_settings_or_exit(config), export, fmt)
        elif week is not None:
            body = run_week(_settings_or_exit(config), week, policy or [], fmt)
        else:
            assert trace is not None
            body = run_replay(trace, policy or [], fmt)
    except StartupError as e:
        fail(str(e))
    except ReplayInputError as e:
        n = len(e.problems)
        typer.echo(f"{e.source}: cannot replay, {n} problem{'s' if n > 1 else ''}:", err=True)
        for p in e.problems:
            typer.echo(f"  {p}", err=True)
        raise typer.Exit(2) from None
    emit(body, out, "watchtower replay")


def emit(body: bytes, out: Path | None, command: str) -> None:
    """Write a command's output to `out`, or to standard output; a file that cannot be written is a usage
    error (exit 2) that names it, after the command's name."""
    if out is None:
        sys.stdout.buffer.write(body)
        return
    try:
        out.write_bytes(body)
    except OSError as e:
        typer.echo(f"{command}: {out}: cannot write: {e.strerror}", err=True)
        raise typer.Exit(2) from None


report_cli = typer.Typer(
    no_args_is_help=True, help="Reports from the recorded history and Prometheus: the weekly fairness report."
)
cli.add_typer(report_cli, name="report")


@report_cli.command("fairness")
def report_fairness(
    week: Annotated[
        str | None, typer.Option(help="ISO week YYYY-Www, e.g. 2026-W47 (default: the last complete week)")
    ] = None,
    team: Annotated[str | None, typer.Option(help="only this team")] = None,
    fmt: Annotated[str, typer.Option("--format", help="json, csv, html (charts inline) or text")] = "json",
    out: Annotated[Path | None, typer.Option(help="write to this file (default: standard output)")] = None,
    config: Annotated[
        Path | None, typer.Option(help="configuration file (default: built-in defaults)")
    ] = None,
    send: Annotated[
        bool,
        typer.Option(
            "--send",
            help="email the week's report to every recipient not yet sent it (once per week per recipient)",
        ),
    ] = False,
    deliver: Annotated[
        bool,
        typer.Option(
            help="with --send: deliver the emails now; --no-deliver leaves them to the service on the same store"
        ),
    ] = True,
    fleet: Annotated[
        bool,
        typer.Option(
            "--fleet",
            help="the fleet's report: usage from the global engine (--prometheus), each cluster's history "
            "from its Watchtower (--cluster NAME=URL, repeated)",
        ),
    ] = False,
    prometheus: Annotated[
        str | None, typer.Option(help="with --fleet: the global engine's Prometheus API URL")
    ] = None,
    cluster: Annotated[
        list[str] | None,
        typer.Option(
            "--cluster",
            help="with --fleet: NAME=URL of a cluster's Watchtower (repeat it); none: the config's fleet.clusters",
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(help="with --fleet: a file holding the clusters' server.api_token (bearer token)"),
    ] = None,
) -> None:
    """Print, write or email the weekly fairness report: the configured store's history and Prometheus's
    usage, computed as the service computes it (--fleet: many clusters', see docs/fleet.md)."""
    if fleet:
        _report_fleet(config, week, fmt, out, prometheus, cluster or [], token_file, team=team, send=send)
        return
    from watchtower.api.fairness.formats import FORMATS
    from watchtower.bootstrap import StartupError
    from watchtower.commands.report import render_report, report_source_for, send_reports
    from watchtower.domain.fairness.week import IsoWeek
    from watchtower.services.fairness_report import UnknownTeam
    from watchtower.services.fairness_send import fetch_report, last_complete_week

    def fail(message: str) -> NoReturn:
        typer.echo(f"watchtower report fairness: {message}", err=True)
        raise typer.Exit(2)

    if fmt not in FORMATS:
        fail(f"--format is one of {', '.join(sorted(FORMATS))}")
    try:
        wk = IsoWeek.parse(week) if week is not None else None
    except ValueError as e:
        fail(f"--week: {e}")
    settings = _settings_or_exit(config)
    source = report_source_for(settings)
    if source is None:
        fail("fairness.enabled is false: no history is recorded")
    w = wk or last_complete_week(time.time(), settings.fairness.timezone)
    if send:
        try:
            outcome, statuses = asyncio.run(
                send_reports(settings, source, w, deliver_for=120.0 if deliver else 0.0)
            )
        except StartupError as e:
            fail(str(e))
        typer.echo(
            f"{outcome.week}: {outcome.enqueued} email(s) enqueued, {outcome.already_sent} recipient(s)"
            f" sent it before; outbox: {statuses}"
        )
        for s in outcome.skipped:
            typer.echo(f"skipped (not an email address): {s!r}", err=True)
        raise typer.Exit(1 if statuses.get("failed") or (deliver and statuses.get("pending")) else 0)
    try:
        body = render_report(asyncio.run(fetch_report(source, w, team)), fmt, team=team).encode()
    except (StartupError, UnknownTeam) as e:
        fail(str(e.args[0]))
    emit(body, out, "watchtower report fairness")


def _report_fleet(
    config: Path | None,
    week: str | None,
    fmt: str,
    out: Path | None,
    prometheus: str | None,
    clusters: list[str],
    token_file: Path | None,
    *,
    team: str | None,
    send: bool,
) -> None:
    from watchtower.commands.fleet_report import FleetUsageError, fleet_body

    try:
        if send or team is not None:
            raise FleetUsageError("--send and --team are for one cluster's report")
        body = fleet_body(
            lambda: _settings_or_exit(config), week, fmt, prometheus, clusters, token_file, now=time.time()
        )
        emit(body, out, "watchtower report fairness --fleet")
    except FleetUsageError as e:
        typer.echo(f"watchtower report fairness --fleet: {e}", err=True)
        raise typer.Exit(2) from None


def stop_on_sigterm() -> None:
    """Make SIGTERM (kill, a pod being stopped) stop the service as Ctrl-C does: every part it started is
    stopped and its files removed, not left behind (a demo's Prometheus, its temporary directory)."""
    signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))


def _echo(line: str) -> None:
    typer.echo(line)
    sys.stdout.flush()


if __name__ == "__main__":
    cli()
