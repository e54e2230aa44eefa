"""`watchtower report fairness --fleet`: the fleet's weekly fairness from the global metrics engine and each
cluster's Watchtower history.

Each cluster's figures are its own report's: FairnessReports.build, as the cluster's service runs it, on the
cluster's history (read over its API, GET /api/v1/fairness/history) and on the engine's answers cut down to
the cluster (adapters/prometheus/fleet_reader.py: every query asked once `by (cluster, ...)` for all of
them). domain/fairness/fleet.py then combines them. The clusters come from the command line
(`--cluster NAME=URL`) or `fleet.clusters`; a cluster whose Watchtower does not answer, or whose series the
engine does not hold for the week, is named missing and not counted. Building it is runtime/fleet_report.py's
(the weekly job sends it too), rendering it services/fleet_render.py's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from watchtower.config.model import Settings
from watchtower.domain.fairness.week import IsoWeek
from watchtower.runtime.fleet_report import configured_clusters, fleet_report
from watchtower.services.fleet_render import FLEET_FORMATS, render_fleet


def parse_clusters(given: list[str]) -> dict[str, str]:
    """Return name → URL from `--cluster NAME=URL` options; ValueError for a malformed or repeated one."""
    out: dict[str, str] = {}
    for g in given:
        name, sep, url = g.partition("=")
        if not sep or not name or not url.startswith(("http://", "https://")):
            raise ValueError(f"--cluster takes NAME=URL (http:// or https://): {g!r}")
        if name in out:
            raise ValueError(f"--cluster {name} is given twice")
        out[name] = url
    return out


class FleetUsageError(ValueError):
    """A command line the fleet report cannot run with, in words for the user."""


def fleet_body(
    load_settings: Callable[[], Settings],
    week: str | None,
    fmt: str,
    prometheus: str | None,
    clusters: list[str],
    token_file: Path | None,
    *,
    now: float,
) -> bytes:
    """Return the fleet report the command line asks for, rendered; FleetUsageError for a bad one."""
    from watchtower.services.fairness_send import last_complete_week

    if fmt not in FLEET_FORMATS:
        raise FleetUsageError(f"--format is one of {', '.join(FLEET_FORMATS)}")
    if not prometheus:
        raise FleetUsageError("--prometheus URL (the global engine) is required")
    try:
        named = parse_clusters(clusters)
        wk = IsoWeek.parse(week) if week is not None else None
    except ValueError as e:
        raise FleetUsageError(str(e)) from None
    token = _token(token_file, "--token-file") if token_file is not None else None
    settings = load_settings()
    tokens: dict[str, str | None] = {}
    if not named:
        # The clusters the fleet page lists (`fleet.clusters`), this one first when it is named, each with its
        # own token file unless --token-file gives one for all.
        try:
            named, tokens = configured_clusters(settings)
        except OSError as e:
            raise FleetUsageError(
                f"fleet.clusters: a token_file cannot be read: {e.filename}: {e.strerror}"
            ) from None
        if token is not None:
            tokens = {}
    if not named:
        raise FleetUsageError(
            "name the clusters: --cluster NAME=URL, once each, or fleet.clusters in the config"
        )
    w = wk or last_complete_week(now, settings.fairness.timezone)
    report = asyncio.run(
        fleet_report(
            settings, prometheus=prometheus, clusters=named, week=w, now=now, token=token, tokens=tokens
        )
    )
    return render_fleet(report, fmt).encode()


def _token(path: Path, what: str) -> str:
    try:
        return path.read_text().strip()
    except OSError as e:
        raise FleetUsageError(f"{what} {path}: {e.strerror}") from None
