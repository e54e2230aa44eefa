"""The `kubectl-watchtower` console script: `why`, `queue` and `teams`, with kubectl's flags, output formats,
errors (`error: ...` on stderr) and exit codes (1 on any error)."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from watchtower.adapters.kube.service_proxy import context_namespace
from watchtower.domain.fairness.week import IsoWeek

from . import render
from .reach import Answer, PluginError, Reach, connect

cli = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Ask Watchtower why GPU work waits (a kubectl plugin: `kubectl watchtower ...`).",
)

WAITING = ("pending", "partial", "quota_blocked")


class Target:
    """The connection flags every command takes, as kubectl and the Service in deploy/ name them."""

    def __init__(self, **kw: Any) -> None:
        self.kw = kw
        self._reach: Reach | None = None

    def reach(self) -> Reach:
        """Return the one connection of this command: its access reviews are remembered until it ends."""
        if self._reach is None:
            try:
                self._reach = connect(**self.kw)
            except PluginError as e:
                fail(str(e))
        return self._reach

    def namespace(self) -> str:
        """The namespace kubectl would use without -n: the kubeconfig context's, else `default`."""
        return context_namespace(self.kw["kubeconfig"], self.kw["context"])


def fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


@cli.callback()
def main(
    ctx: typer.Context,
    kubeconfig: Annotated[
        str | None, typer.Option("--kubeconfig", help="path to the kubeconfig file (else $KUBECONFIG)")
    ] = None,
    context: Annotated[str | None, typer.Option("--context", help="the kubeconfig context to use")] = None,
    server: Annotated[
        str | None,
        typer.Option("--server", help="talk to Watchtower at this URL directly (a port-forward) instead"),
    ] = None,
    wt_namespace: Annotated[
        str, typer.Option("--watchtower-namespace", help="namespace of Watchtower's Service")
    ] = "watchtower",
    wt_service: Annotated[str, typer.Option("--watchtower-service", help="name of Watchtower's Service")] = (
        "watchtower"
    ),
    wt_port: Annotated[str, typer.Option("--watchtower-port", help="the Service's port (number or name)")] = (
        "8080"
    ),
) -> None:
    # Handed to the command through typer's context, as click passes shared options.
    ctx.obj = Target(
        server=server,
        kubeconfig=kubeconfig,
        context=context,
        namespace=wt_namespace,
        service=wt_service,
        port=wt_port,
    )


def _get(ctx: typer.Context, path: str, query: list[tuple[str, str]]) -> Answer:
    target: Target = ctx.obj
    try:
        return target.reach().get(path, query)
    except PluginError as e:
        fail(str(e))


def _may_read(ctx: typer.Context, namespace: str) -> bool:
    target: Target = ctx.obj
    try:
        return target.reach().may_read(namespace)
    except PluginError as e:
        fail(str(e))


def _forbid_unless_readable(ctx: typer.Context, namespace: str) -> None:
    """Fail as kubectl does on a Forbidden when the user may not list pods in `namespace`."""
    if not _may_read(ctx, namespace):
        fail(
            f'forbidden: you may not list pods in namespace "{namespace}", so kubectl watchtower does not show '
            "its work"
        )


def _readable(ctx: typer.Context, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the rows (each with a `namespace`) the user may be shown; warn when some were left unchecked."""
    kept = [r for r in rows if _may_read(ctx, str(r.get("namespace")))]
    unchecked = ctx.obj.reach().unchecked()
    if unchecked:
        typer.echo(
            f"Warning: {unchecked} more namespaces were not checked for your access and are not shown "
            "(name one with -n)",
            err=True,
        )
    return kept


def _readable_report(ctx: typer.Context, report: dict[str, Any]) -> dict[str, Any]:
    """Return the fairness report with only the teams (and their workload lines) the user may be shown: a team
    whose namespaces the user may list at least one of. The cluster's own figures are totals and stay."""
    teams = []
    for t in report.get("teams") or []:
        # A team whose namespaces the report does not know is shown to those who may list every namespace.
        namespaces = [str(ns) for ns in t.get("namespaces") or []] or [""]
        if not any(_may_read(ctx, ns) for ns in namespaces):
            continue
        t = dict(t)
        for key in ("long_running", "top_waiting"):
            if isinstance(t.get(key), list):
                t[key] = [w for w in t[key] if _may_read(ctx, str(w.get("namespace")))]
        teams.append(t)
    return {**report, "teams": teams}


def _fmt(output: str) -> str:
    if output not in render.FORMATS:
        fail(
            f'unable to match a printer suitable for the output format "{output}", allowed formats are: '
            "json,yaml,wide"
        )
    return output


def _local(objects: Path | None) -> dict[str, Any]:
    """Return `watchtower analyze`'s document for a dump (`kubectl get ... -o json`, or - for stdin)."""
    from watchtower.adapters.kube.decoder import DecodeError
    from watchtower.commands.analyze import analyze_dump
    from watchtower.config import Settings

    if objects is None:
        fail(
            "--local reads the objects you may see from --objects FILE (kubectl get pods,events,nodes,"
            "namespaces -A -o json > FILE; - for stdin); docs/kubectl.md"
        )
    try:
        data = sys.stdin.buffer.read() if str(objects) == "-" else objects.read_bytes()
    except OSError as e:
        fail(f"{objects}: cannot read: {e.strerror}")
    try:
        doc, _ = analyze_dump(data, Settings(), at=None, now=time.time())
    except DecodeError as e:
        fail(f"{objects}: not a Kubernetes List in JSON: {e}")
    return doc


Output = Annotated[str, typer.Option("-o", "--output", help="json, yaml or wide")]
Local = Annotated[bool, typer.Option("--local", help="analyse --objects here instead of asking Watchtower")]
Objects = Annotated[Path | None, typer.Option("--objects", help="with --local: a kubectl get -o json dump")]


@cli.command()
def why(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="the workload (Job, PyTorchJob, RayCluster, ... or pod group)")],
    namespace: Annotated[
        str | None, typer.Option("-n", "--namespace", help="its namespace (default: the context's)")
    ] = None,
    kind: Annotated[str | None, typer.Option("--kind", help="its kind, when the name is ambiguous")] = None,
    output: Output = "",
    local: Local = False,
    objects: Objects = None,
) -> None:
    """Why NAME waits: its wait, tier, state, the reason, its position, start estimate and preemptions."""
    fmt = _fmt(output)
    namespace = namespace or ctx.obj.namespace()
    what = f"{namespace}/{name}{f' of kind {kind}' if kind else ''}"
    if local:
        found = [
            w
            for w in _local(objects).get("workloads", [])
            if w["namespace"] == namespace and w["name"] == name and kind in (None, w["kind"])
        ]
        if not found:
            fail(f'workload "{what}" not found in --objects')
        if len(found) > 1:
            fail(f"{namespace}/{name} names several workloads: add --kind")
        detail: dict[str, Any] = {"workload": found[0], "preemptions": []}
    else:
        _forbid_unless_readable(ctx, namespace)
        a = _get(ctx, f"/api/v1/workloads/{namespace}/{name}", [("kind", kind)] if kind else [])
        if a.status == 404:
            fail(f'workload "{what}" not found: {a.detail()}')
        if a.status == 409:
            fail(a.detail().replace("add ?kind=", "add --kind"))
        if a.status != 200:
            fail(f"Watchtower answered HTTP {a.status}: {a.detail()}")
        detail = a.json()
    if fmt in ("json", "yaml"):
        typer.echo(render.dump(detail, fmt), nl=False)
    else:
        typer.echo(render.why(detail, wide=fmt == "wide"), nl=False)


@cli.command()
def queue(
    ctx: typer.Context,
    namespace: Annotated[str | None, typer.Option("-n", "--namespace", help="only this namespace")] = None,
    all_namespaces: Annotated[bool, typer.Option("-A", "--all-namespaces", help="every namespace")] = False,
    tier: Annotated[list[str] | None, typer.Option("--tier", help="only this tier (repeatable)")] = None,
    output: Output = "",
    local: Local = False,
    objects: Objects = None,
) -> None:
    """The waiting work as a table, oldest first (-n NS, default the context's; -A: every namespace)."""
    fmt = _fmt(output)
    ns = None if all_namespaces else (namespace or ctx.obj.namespace())
    if local:
        doc = _local(objects)
        doc = {
            "workloads": [
                w
                for w in doc.get("workloads", [])
                if w["state"] in WAITING and ns in (None, w["namespace"]) and (not tier or w["tier"] in tier)
            ]
        }
    else:
        if ns is not None:
            _forbid_unless_readable(ctx, ns)
        query = [("state", "waiting"), ("limit", "100000")]
        query += [("namespace", ns)] if ns else []
        query += [("tier", t) for t in tier or ()]
        a = _get(ctx, "/api/v1/queue", query)
        if a.status != 200:
            fail(a.detail())
        doc = a.json()
        rows = doc.get("workloads") or []
        doc["workloads"] = _readable(ctx, rows)
        hidden = len(rows) - len(doc["workloads"])
        for key in ("count", "total"):
            if hidden and isinstance(doc.get(key), int):
                doc[key] -= hidden
    doc["workloads"] = sorted(doc.get("workloads") or [], key=lambda w: -float(w.get("wait_seconds") or 0))
    if fmt in ("json", "yaml"):
        typer.echo(render.dump(doc, fmt), nl=False)
        return
    text = render.queue(doc, wide=fmt == "wide")
    if not text:
        # As kubectl: nothing found goes to stderr and is not an error.
        typer.echo(f"No waiting workloads found{f' in {ns} namespace' if ns else ''}.", err=True)
    typer.echo(text, nl=False)


@cli.command()
def teams(
    ctx: typer.Context,
    week: Annotated[
        str | None,
        typer.Option("--week", help="ISO week YYYY-Www (default: this week, by Watchtower's clock)"),
    ] = None,
    output: Output = "",
) -> None:
    """Per team this week: GPU-hours used, entitled and waited for, and the work waiting now."""
    fmt = _fmt(output)
    q = _get(ctx, "/api/v1/queue", [("state", "waiting"), ("limit", "100000")])
    if q.status != 200:
        fail(q.detail())
    waiting_doc = q.json()
    waiting_doc["workloads"] = _readable(ctx, waiting_doc.get("workloads") or [])
    if week is None:
        at = datetime.fromisoformat(str(waiting_doc["at"]).replace("Z", "+00:00"))
        week = str(IsoWeek.containing(at.timestamp(), UTC))
    a = _get(ctx, "/api/v1/reports/fairness", [("week", week)])
    if a.status != 200:
        fail(a.detail())
    report = _readable_report(ctx, a.json())
    if fmt in ("json", "yaml"):
        typer.echo(render.dump(report, fmt), nl=False)
        return
    waiting: dict[str, int] = {}
    for w in waiting_doc.get("workloads") or []:
        waiting[w["team"]] = waiting.get(w["team"], 0) + 1
    typer.echo(
        f"Week {report['week']} ({report['timezone']}){' (partial data)' if report['partial'] else ''}"
    )
    typer.echo(render.teams(report, waiting, wide=fmt == "wide") or "No teams.\n", nl=False)


# The connection flags kubectl users put anywhere (`kubectl watchtower why NAME --context prod`): moved before
# the command, where the group's options are read.
_GLOBAL = (
    "--kubeconfig",
    "--context",
    "--server",
    "--watchtower-namespace",
    "--watchtower-service",
    "--watchtower-port",
)


def flags_first(argv: list[str]) -> list[str]:
    """Return `argv` with the connection flags (and their values) moved before the command."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            rest.extend(argv[i:])
            break
        name = a.split("=", 1)[0]
        if name in _GLOBAL:
            front.append(a)
            if "=" not in a and i + 1 < len(argv):
                front.append(argv[i + 1])
                i += 1
        else:
            rest.append(a)
        i += 1
    return front + rest


def main_entry() -> None:
    """The console script `kubectl-watchtower`."""
    cli(args=flags_first(sys.argv[1:]), prog_name="kubectl-watchtower")


if __name__ == "__main__":
    main_entry()
