"""The fleet's fairness report, end to end (`bench/report.py --clusters N`): N clusters of bench/report.py's
week (`--teams` teams each) in one real Prometheus as the global engine, each under its own `cluster`
label, the fleet-mode fairness usage rules backfilled over them (as the engine's ruler would record them);
each cluster's history (bench/report.py's) in its own SQLite store, served by its own Watchtower (uvicorn on
127.0.0.1) over GET /api/v1/fairness/history. Timed: commands/fleet_report.fleet_report, what
`watchtower report fairness --fleet` runs; printed beside the bare replay, with httpx, of the queries it
sent to the engine in the same run.

Target (issue 32): ≤ 15 s end to end for 3 clusters × 200 teams × 7 days.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import uvicorn

from alerts.params import params_from
from alerts.recording import fairness_usage_group
from alerts.render import to_yaml
from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.api.app import create_app
from watchtower.bootstrap import build_container
from watchtower.commands.fleet_report import cluster_reports
from watchtower.config import Settings, settings_from_mapping
from watchtower.domain.fairness.fleet import combine
from watchtower.domain.fairness.week import IsoWeek
from watchtower.domain.health import SourceHealth
from watchtower.domain.promql.fleet import keep_label

TOKEN = "bench-token"


def _labelled(src: Path, dst: Path, cluster: str) -> None:
    """Copy the OpenMetrics week with `cluster="<name>"` first in every series' labels."""
    with src.open() as f, dst.open("w") as out:
        for line in f:
            if not line.startswith("#"):
                i = line.find("{")
                line = f'{line[: i + 1]}cluster="{cluster}",{line[i + 1 :]}'
            out.write(line)


def _fleet_settings(url: str, sample: int, step: float, theta: float) -> Settings:
    return settings_from_mapping(
        {
            "prometheus": {"url": url, "scrape_interval": float(sample), "idle_threshold": theta},
            "fairness": {"enabled": True, "step": step},
            "artefacts": {"fleet": True},
        },
        env={"WATCHTOWER_SERVER__API_TOKEN": TOKEN},
    )


class _At:
    def __init__(self, at: float) -> None:
        self.at = at

    def now(self) -> float:
        return self.at


@asynccontextmanager
async def _serve(app: Any, port: int) -> AsyncIterator[str]:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def run(args: Any, bench: Any) -> None:
    """bench/report.py's main for `--clusters N`; `bench` is that module (its week, history, Prometheus)."""
    names = [f"c{i}" for i in range(args.clusters)]
    end = bench.T0 + args.days * bench.DAY
    week = IsoWeek(2023, 46)
    with tempfile.TemporaryDirectory(prefix="bench-report-fleet-") as d:
        tmp = Path(d)
        began = time.perf_counter()
        samples = bench.write_week(tmp / "week.om.txt", teams=args.teams, days=args.days, sample=args.sample)
        for name in names:
            _labelled(tmp / "week.om.txt", tmp / f"{name}.om.txt", name)
            subprocess.run(
                [
                    *("promtool", "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=168h"),
                    *(str(tmp / f"{name}.om.txt"), str(tmp / "data")),
                ],
                check=True,
                capture_output=True,
            )
            (tmp / f"{name}.om.txt").unlink()
        (tmp / "week.om.txt").unlink()
        print(
            f"{args.clusters} clusters × {args.teams} teams × {args.days} days: {samples * args.clusters:,} "
            f"samples written and backfilled in {time.perf_counter() - began:.1f} s (not the target)",
            flush=True,
        )
        port = bench._free_port()
        url = f"http://127.0.0.1:{port}"
        settings = _fleet_settings(url, args.sample, bench.STEP, bench.THETA)
        p = params_from(settings)
        group = fairness_usage_group(p)
        for rule in group["rules"]:  # type: ignore[attr-defined]
            rule["expr"] = keep_label(rule["expr"], *p.keep)  # as `watchtower generate --fleet` writes them
        rules = tmp / "rules" / "watchtower-rules.yaml"
        rules.parent.mkdir()
        rules.write_text(to_yaml({"groups": [group]}, command="bench"))
        proc = bench.start_prometheus(tmp / "data", tmp / "prometheus.log", port)
        try:
            began = time.perf_counter()
            subprocess.run(
                [
                    *("promtool", "tsdb", "create-blocks-from", "rules", f"--start={bench.T0}"),
                    *(f"--end={end + int(bench.STEP)}", f"--url={url}", f"--output-dir={tmp / 'rules-out'}"),
                    str(rules),
                ],
                check=True,
                capture_output=True,
            )
            bench.stop(proc)
            for block in (tmp / "rules-out").iterdir():
                if (block / "meta.json").exists():
                    shutil.move(str(block), str(tmp / "data" / block.name))
            proc = bench.start_prometheus(tmp / "data", tmp / "prometheus.log", port)
            print(
                f"fleet rules backfilled in {time.perf_counter() - began:.1f} s (not the target)", flush=True
            )
            stores = {n: SQLiteFairnessHistory(tmp / f"{n}.db") for n in names}
            tiers = [t.name for t in settings.tiers]
            for s in stores.values():
                bench.write_history(s, teams=args.teams, tiers=tiers, end=end)
            asyncio.run(_timed(args, settings, stores, url, week, end, bench))
            for s in stores.values():
                s.close()
        finally:
            bench.stop(proc)


async def _timed(
    args: Any,
    settings: Settings,
    stores: dict[str, SQLiteFairnessHistory],
    url: str,
    week: IsoWeek,
    end: float,
    bench: Any,
) -> None:
    now = end + 3600
    async with AsyncExitStack() as stack:
        urls = {}
        for name, store in stores.items():
            c = build_container(
                settings, clock=_At(now), source_health=SourceHealth, source_name="bench", history=store
            )
            urls[name] = await stack.enter_async_context(_serve(create_app(c), bench._free_port()))
        ours, bare = [], []
        report = None
        sent: list[tuple[str, float | None]] = []
        for _ in range(args.runs):
            began = time.perf_counter()
            reports, missing, answers = await cluster_reports(
                settings, prometheus=url, clusters=urls, week=week, now=now, token=TOKEN
            )
            report = combine(str(week), 0.0, 0.0, now, reports, missing)
            ours.append(time.perf_counter() - began)
            sent = answers.sent
            bare.append(await asyncio.to_thread(bench._bare, url, sent))
        assert report is not None
        bench._load()
        paths = {r.method.usage_path for r in reports.values()}
        print(f"usage path(s): {' | '.join(sorted(paths))}")
        print(
            f"fleet report {report.week}: {len(report.clusters)} clusters, {len(report.teams)} teams, "
            f"missing {list(report.missing) or 'none'}; Jain's index {report.jain}"
        )
        print(
            f"fleet report (cluster_reports + combine: {len(urls)} Watchtower APIs + the engine): "
            f"first {ours[0]:.2f} s, median {statistics.median(ours):.2f} s over {args.runs}"
        )
        print(
            f"reference (the same {len(sent)} engine queries replayed bare with httpx): first {bare[0]:.2f} s, "
            f"median {statistics.median(bare):.2f} s"
        )
        print("target: ≤ 15 s end to end for 3 clusters × 200 teams × 7 days", flush=True)
