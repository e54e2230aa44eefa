"""The weekly fairness report for 200 teams over 7 days, end to end: `FairnessReports.build` (the service
the API, CLI and weekly send call) with a SQLite FairnessHistory holding a known history and the
Prometheus reader against a real Prometheus, the raw week loaded by `promtool tsdb create-blocks-from
openmetrics` and the generated fairness usage rules by `promtool tsdb create-blocks-from rules`. Printed
beside the reference of the same run: the same queries the report sent, replayed bare with httpx.

    PYTHONPATH=. .venv/bin/python bench/report.py [--teams 200] [--days 7] [--sample 300] [--runs 3]
    PYTHONPATH=. .venv/bin/python bench/report.py --clusters 3   # the fleet report (bench/report_fleet.py)

The week (ISO week 2023-W46): per team a namespace with a team label and a GPU quota, one pod a day for 20
hours (1-4 GPUs, every third day idle under θ), its DCGM devices, Watchtower's waiting-GPU gauge; 64 nodes
of 8 GPUs, one cordoned for a day. Samples every `--sample` seconds (the queries read KSM with a bridge of
two scrapes, as the service does for that scrape interval). The history: per team and week of the 8-week
trend two wait episodes and one preemption, and a heartbeat a minute over the week. Generating and
backfilling (raw data, then rules) are timed apart: not the target. The report reads 8 weeks (the trend);
the 7 before the backfilled one have no data.

Target (issue 15): the report ≤ 10 s end to end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

import httpx

from alerts.params import params_from
from alerts.recording import fairness_usage_group
from alerts.render import to_yaml
from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.adapters.prometheus.fairness import PrometheusFairness
from watchtower.adapters.prometheus.reader import PrometheusReader
from watchtower.config import Settings, settings_from_mapping
from watchtower.domain.fairness.history import PreemptionRecord, WaitEpisode
from watchtower.domain.fairness.week import IsoWeek
from watchtower.domain.gpu_usage import Sample
from watchtower.domain.promql.exporters import ExporterQueries
from watchtower.domain.promql.fairness import FairnessQueries
from watchtower.domain.promql.own import OwnQueries
from watchtower.services.fairness_report import TREND_WEEKS, FairnessReports

T0 = 1_699_833_600  # Monday 2023-11-13 00:00 UTC: ISO week 2023-W46 begins, a multiple of 300 s
DAY = 86_400
NODES, NODE_GPUS = 64, 8
STEP = 300.0
THETA = 10.0
GIB = 2**30
KSM = 'job="kube-state-metrics"'
OWN = 'job="watchtower",instance="watchtower:8080"'


def _write(out: TextIO, name: str, labels: str, samples: Iterator[tuple[int, float]]) -> int:
    n = 0
    for t, v in samples:
        out.write(f"{name}{{{labels}}} {int(v) if float(v).is_integer() else v} {t}\n")
        n += 1
    return n


def write_week(path: Path, *, teams: int, days: int, sample: int) -> int:
    """Write the week as OpenMetrics to `path` (streamed: it is large); return the number of samples."""
    end = T0 + days * DAY
    times = range(T0 + 30, end, sample)
    n = 0
    with path.open("w") as out:
        out.write("# TYPE kube_node_status_allocatable gauge\n")
        for i in range(NODES):
            for resource, unit, v in (
                ("nvidia_com_gpu", "integer", NODE_GPUS),
                ("cpu", "core", 96),
                ("memory", "byte", 1024 * GIB),
            ):
                labels = f'{KSM},node="n-{i:02d}",resource="{resource}",unit="{unit}"'
                n += _write(out, "kube_node_status_allocatable", labels, ((t, v) for t in times))
        out.write("# TYPE kube_node_spec_unschedulable gauge\n")
        for i in range(NODES):
            cordoned = (T0 + DAY, T0 + 2 * DAY) if i == 0 else (0, 0)
            n += _write(
                out,
                "kube_node_spec_unschedulable",
                f'{KSM},node="n-{i:02d}"',
                ((t, float(cordoned[0] <= t < cordoned[1])) for t in times),
            )
        out.write("# TYPE kube_node_status_condition gauge\n")
        for i in range(NODES):
            labels = f'{KSM},node="n-{i:02d}",condition="Ready",status="true"'
            n += _write(out, "kube_node_status_condition", labels, ((t, 1.0) for t in times))
        out.write("# TYPE kube_namespace_labels gauge\n")
        for k in range(teams):
            labels = f'{KSM},namespace="ns-{k:03d}",label_team="team-{k:03d}"'
            n += _write(out, "kube_namespace_labels", labels, ((t, 1.0) for t in times))
        out.write("# TYPE kube_resourcequota gauge\n")
        for k in range(teams):
            labels = f'{KSM},namespace="ns-{k:03d}",resourcequota="gpu",resource="requests.nvidia.com/gpu",type="hard"'
            n += _write(out, "kube_resourcequota", labels, ((t, 4.0) for t in times))

        def pods() -> Iterator[tuple[int, int, int, int, int, int]]:
            for k in range(teams):
                for d in range(days):
                    start = T0 + d * DAY + (k % 4) * 3600
                    yield k, d, start, start + 20 * 3600, 1 + k % 4, (k + d) % NODES

        out.write("# TYPE kube_pod_status_phase gauge\n")
        for k, d, start, stop, _, _ in pods():
            labels = f'{KSM},namespace="ns-{k:03d}",pod="p-{d}",uid="u-{k}-{d}",phase="Running"'
            alive = [t for t in times if start - 600 <= t < stop + 600]  # KSM drops a deleted pod's series
            n += _write(out, "kube_pod_status_phase", labels, ((t, float(start <= t < stop)) for t in alive))
        out.write("# TYPE kube_pod_container_resource_requests gauge\n")
        for k, d, start, stop, gpus, node in pods():
            base = f'{KSM},namespace="ns-{k:03d}",pod="p-{d}",uid="u-{k}-{d}",container="main",node="n-{node:02d}"'
            alive = [t for t in times if start - 600 <= t < stop + 600]
            for resource, unit, v in (
                ("nvidia_com_gpu", "integer", gpus),
                ("cpu", "core", 8 * gpus),
                ("memory", "byte", 64 * GIB * gpus),
            ):
                labels = f'{base},resource="{resource}",unit="{unit}"'
                n += _write(out, "kube_pod_container_resource_requests", labels, ((t, v) for t in alive))
        out.write("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n")
        for k, d, start, stop, gpus, node in pods():
            util = 2.0 if d % 3 == 2 else 80.0
            for g in range(gpus):
                labels = (
                    f'job="dcgm-exporter",gpu="{g}",UUID="GPU-{node}-{g}",Hostname="n-{node:02d}",'
                    f'container="main",namespace="ns-{k:03d}",pod="p-{d}"'
                )
                n += _write(
                    out, "DCGM_FI_DEV_GPU_UTIL", labels, ((t, util) for t in times if start <= t < stop)
                )
        out.write("# TYPE watchtower_waiting_gpus gauge\n")
        for k in range(teams):
            labels = f'{OWN},team="team-{k:03d}",tier="low"'
            n += _write(
                out,
                "watchtower_waiting_gpus",
                labels,
                ((t, float(1 + k % 3) if (t - T0) % DAY >= 20 * 3600 else 0.0) for t in times),
            )
        out.write("# TYPE watchtower_last_evaluation_timestamp_seconds gauge\n")
        n += _write(out, "watchtower_last_evaluation_timestamp_seconds", OWN, ((t, float(t)) for t in times))
        out.write("# EOF\n")
    return n


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_prometheus(data: Path, log: Path, port: int) -> subprocess.Popen[bytes]:
    config = data.parent / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1m\n")
    with log.open("ab") as f:
        proc = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={data}",
                "--storage.tsdb.retention.time=10y",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"prometheus exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.terminate()
    raise SystemExit("prometheus not ready in 300 s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()  # this pid only
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class RecordingReader(PrometheusReader):
    """The service's reader, noting each (query, time) it sends, for the bare replay."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.sent: list[tuple[str, float | None]] = []

    def query_many_sync(self, queries: Sequence[str], *, at: float | None = None) -> list[list[Sample]]:
        self.sent.extend((q, at) for q in queries)
        return super().query_many_sync(queries, at=at)


def _bare(url: str, sent: list[tuple[str, float | None]]) -> float:
    """Seconds for the queries sent one after the other straight to /api/v1/query."""
    with httpx.Client(base_url=url, timeout=300) as client:
        began = time.perf_counter()
        for e, at in sent:
            params = {"query": e} | ({"time": f"{at:.3f}"} if at is not None else {})
            r = client.get("/api/v1/query", params=params)
            r.raise_for_status()
            assert r.json()["status"] == "success"
        return time.perf_counter() - began


def write_history(h: SQLiteFairnessHistory, *, teams: int, tiers: Sequence[str], end: float) -> int:
    """Per team and week of the trend: a 6-hour wait scheduled, a 2-hour one gone, a preemption; a heartbeat
    a minute over the report's week. Return the rows written."""
    eps, pre = [], []
    first = end - TREND_WEEKS * 7 * DAY
    for k in range(teams):
        team, ns, tier = f"team-{k:03d}", f"ns-{k:03d}", tiers[k % len(tiers)]
        for w in range(TREND_WEEKS):
            base = first + w * 7 * DAY + (k % 24) * 3600
            for n, (length, outcome) in enumerate(((6 * 3600, "scheduled"), (2 * 3600, "gone"))):
                started = base + n * 2 * DAY
                eps.append(
                    WaitEpisode(
                        f"{ns}/Job/j-{w}-{n}@{started:.0f}",
                        "pod",
                        ns,
                        team,
                        tier,
                        f"Job/j-{w}-{n}",
                        1 + k % 4,
                        started,
                        started + length,
                        outcome,  # type: ignore[arg-type]
                    )
                )
            other = f"team-{(k + 1) % teams:03d}"
            pre.append(
                PreemptionRecord(
                    f"uid-{k}-{w}",
                    base + 3 * DAY,
                    ns,
                    team,
                    tier,
                    f"Job/v-{w}",
                    f"ns-{(k + 1) % teams:03d}",
                    other,
                    tiers[0],
                    f"Job/p-{w}",
                    1 + k % 4,
                    float(4 * (1 + k % 4)),
                )
            )
    beats = [end - 7 * DAY + 60 * m for m in range(7 * 24 * 60)]
    h.record(eps, pre, heartbeats=beats)
    return len(eps) + len(pre) + len(beats)


def _settings(url: str, sample: int) -> Settings:
    return settings_from_mapping(
        {
            "prometheus": {"url": url, "scrape_interval": float(sample), "idle_threshold": THETA},
            "fairness": {"step": STEP},
        },
        env={},
    )


def _reports(settings: Settings, history: SQLiteFairnessHistory, *, use_rules: bool) -> FairnessReports:
    """The service as bootstrap.fairness_reports wires it for the CLI (no live cluster), its reader noting
    what it sends."""
    cfg = settings.prometheus
    assert cfg is not None
    reader = RecordingReader(url=cfg.url, timeout=300.0, retries=0)
    queries = FairnessQueries(
        ExporterQueries(cfg.query_config(settings.teams.label)), OwnQueries(settings.artefacts.job_selector)
    )
    metrics = PrometheusFairness(reader, queries, idle_threshold=cfg.idle_threshold, use_rules=use_rules)
    return FairnessReports(settings=settings, history=history, metrics=metrics)


def _reader(r: FairnessReports) -> RecordingReader:
    assert isinstance(r.metrics, PrometheusFairness) and isinstance(r.metrics.reader, RecordingReader)
    return r.metrics.reader


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--teams", type=int, default=200)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--sample", type=int, default=300, help="seconds between samples (the scrape interval)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--no-subqueries", action="store_true", help="skip the one report through the subquery path"
    )
    ap.add_argument(
        "--clusters",
        type=int,
        default=0,
        help="the fleet report over this many clusters (bench/report_fleet.py)",
    )
    args = ap.parse_args()
    if args.clusters:
        import sys

        import report_fleet

        report_fleet.run(args, sys.modules[__name__])
        return
    for exe in ("prometheus", "promtool"):
        if shutil.which(exe) is None:
            raise SystemExit(f"{exe} not on PATH: run tests/setup/system-deps.sh")
    end = T0 + args.days * DAY
    week = IsoWeek(2023, 46)
    with tempfile.TemporaryDirectory(prefix="bench-report-") as d:
        tmp = Path(d)
        began = time.perf_counter()
        samples = write_week(tmp / "week.om.txt", teams=args.teams, days=args.days, sample=args.sample)
        written = time.perf_counter() - began
        began = time.perf_counter()
        subprocess.run(
            [
                "promtool",
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                "--max-block-duration=168h",  # a few blocks, not one per 2 hours
                str(tmp / "week.om.txt"),
                str(tmp / "data"),
            ],
            check=True,
            capture_output=True,
        )
        (tmp / "week.om.txt").unlink()
        backfilled = time.perf_counter() - began
        print(
            f"{args.teams} teams × {args.days} days, a sample every {args.sample} s: {samples:,} samples "
            f"written in {written:.1f} s, backfilled in {backfilled:.1f} s (not the target)",
            flush=True,
        )
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        settings = _settings(url, args.sample)
        rules = tmp / "rules" / "watchtower-rules.yaml"
        rules.parent.mkdir()
        rules.write_text(to_yaml({"groups": [fairness_usage_group(params_from(settings))]}, command="bench"))
        proc = start_prometheus(tmp / "data", tmp / "prometheus.log", port)
        try:
            began = time.perf_counter()
            subprocess.run(
                [
                    "promtool",
                    "tsdb",
                    "create-blocks-from",
                    "rules",
                    f"--start={T0}",
                    f"--end={end + int(STEP)}",
                    f"--url={url}",
                    f"--output-dir={tmp / 'rules-out'}",
                    str(rules),
                ],
                check=True,
                capture_output=True,
            )
            ruled = time.perf_counter() - began
            stop(proc)
            for block in (tmp / "rules-out").iterdir():
                if (block / "meta.json").exists():
                    shutil.move(str(block), str(tmp / "data" / block.name))
            began = time.perf_counter()
            proc = start_prometheus(tmp / "data", tmp / "prometheus.log", port)
            print(
                f"rules backfilled in {ruled:.1f} s, Prometheus restarted in {time.perf_counter() - began:.1f} s "
                "(not the target)",
                flush=True,
            )
            history = SQLiteFairnessHistory(tmp / "watchtower.db")
            rows = write_history(history, teams=args.teams, tiers=[t.name for t in settings.tiers], end=end)
            print(f"history: {rows:,} rows in SQLite (wait episodes, preemptions, heartbeats)", flush=True)
            ours, bare = [], []
            report, sent = None, 0
            for _ in range(args.runs):  # alternated, so both see the same page cache and load
                service = _reports(settings, history, use_rules=True)
                began = time.perf_counter()
                report = asyncio.run(service.build(week, now=end + 3600))
                ours.append(time.perf_counter() - began)
                sent = len(_reader(service).sent)
                bare.append(_bare(url, _reader(service).sent))
                _reader(service).close()
            assert report is not None
            _load()
            print(f"report {report.week}: {len(report.teams)} teams, {len(report.cluster.trend)} trend weeks")
            print(f"usage path: {report.method.usage_path}")
            print(
                f"report (FairnessReports.build, SQLite + Prometheus, rules path): first {ours[0]:.2f} s, "
                f"median {statistics.median(ours):.2f} s over {args.runs}"
            )
            print(
                f"reference (the same {sent} queries, 8 weeks, replayed bare with httpx): "
                f"first {bare[0]:.2f} s, median {statistics.median(bare):.2f} s"
            )
            print("target: the report ≤ 10 s end to end", flush=True)
            if not args.no_subqueries:
                # The target week alone through the subquery path (the other 7 have no data), for the
                # speed-up and the difference between the paths.
                service = _reports(settings, history, use_rules=True)
                fast = service.metrics
                slow = _reports(settings, history, use_rules=False).metrics
                assert isinstance(fast, PrometheusFairness) and isinstance(slow, PrometheusFairness)
                began = time.perf_counter()
                by_rules = fast.week_usage_sync(float(T0), float(end), STEP)
                rules_s = time.perf_counter() - began
                began = time.perf_counter()
                by_sub = slow.week_usage_sync(float(T0), float(end), STEP)
                sub_s = time.perf_counter() - began
                worst = max(
                    abs((by_rules.teams[t].gpu_hours or 0.0) - (by_sub.teams[t].gpu_hours or 0.0))
                    for t in by_sub.teams
                )
                _load()
                print(
                    f"the week's usage alone: rules path {rules_s:.2f} s, subquery path {sub_s:.2f} s; "
                    f"largest per-team GPU-hours difference between the paths: {worst:.3f}",
                    flush=True,
                )
                fast.reader.close()
                slow.reader.close()
            history.close()
        finally:
            stop(proc)


def _load() -> None:
    load = os.getloadavg()
    print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (2 cores)", flush=True)


if __name__ == "__main__":
    main()
