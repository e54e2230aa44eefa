"""The fairness report's Prometheus part for 200 teams over 7 days: `PrometheusFairness.week_usage` end to
end against a real Prometheus loaded by `promtool tsdb create-blocks-from openmetrics`, beside the reference
of the same run, the same expressions sent straight to /api/v1/query with httpx (no adapter).

    PYTHONPATH=. .venv/bin/python bench/report.py [--teams 200] [--days 7] [--sample 300] [--runs 3]

The week: per team a namespace with a team label and a GPU quota, one pod a day for 20 hours (1-4 GPUs,
every third day idle under θ), its DCGM devices, Watchtower's waiting-GPU gauge; 64 nodes of 8 GPUs, one
cordoned for a day. Samples every `--sample` seconds (the queries read KSM with a bridge of two scrapes, as
the service does for that scrape interval). Generating and backfilling are timed apart: not the target.

Target (issue 15): the report ≤ 10 s end to end. g6's report service (history store + computation) is not
in this branch: this measures the Prometheus half; the full report path is joined after the merge.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import httpx

from watchtower.adapters.prometheus import PrometheusReader
from watchtower.adapters.prometheus_fairness import EDGE, PrometheusFairness
from watchtower.config.prometheus import PrometheusConfig
from watchtower.domain.promql import FairnessQueries, OwnQueries, Queries

T0 = 1_700_000_100  # a multiple of 300 s
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


def start_prometheus(data: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
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
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"prometheus exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return proc, url
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


def _bare(url: str, exprs: list[str], at: float) -> float:
    """Seconds for the expressions sent one after the other straight to /api/v1/query."""
    with httpx.Client(base_url=url, timeout=300) as client:
        began = time.perf_counter()
        for e in exprs:
            r = client.get("/api/v1/query", params={"query": e, "time": f"{at:.3f}"})
            r.raise_for_status()
            assert r.json()["status"] == "success"
        return time.perf_counter() - began


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--teams", type=int, default=200)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--sample", type=int, default=300, help="seconds between samples (the scrape interval)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    for exe in ("prometheus", "promtool"):
        if shutil.which(exe) is None:
            raise SystemExit(f"{exe} not on PATH: run tests/setup/system-deps.sh")
    end = T0 + args.days * DAY
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
            f"written in {written:.1f} s, backfilled in {backfilled:.1f} s (not the target)"
        )
        proc, url = start_prometheus(tmp / "data", tmp / "prometheus.log")
        try:
            cfg = PrometheusConfig(url=url, scrape_interval=float(args.sample), timeout=300).query_config()
            reader = PrometheusReader(url=url, timeout=300, retries=0)
            fairness = PrometheusFairness(
                reader, FairnessQueries(Queries(cfg), OwnQueries('job="watchtower"')), idle_threshold=THETA
            )
            f = fairness.queries
            w = float(end - T0) - EDGE  # the ranges the adapter asks for
            exprs = [
                f.team_gpu_hours(w, STEP),
                f.team_idle_gpu_hours(w, STEP, THETA),
                f.team_cpu_core_hours(w, STEP),
                f.team_memory_gib_hours(w, STEP),
                f.team_quota_gpus_mean(w, STEP),
                f.capacity_gpu_hours(w, STEP),
                f.capacity_gpus_mean(w, STEP),
                f.allocated_gpu_hours(w, STEP),
                f.idle_allocated_gpu_hours(w, STEP, THETA),
                f.free_while_waiting_gpu_hours(w, STEP),
                f.unavailable_gpu_hours(w, STEP),
                f.capacity_cpu_core_hours(w, STEP),
                f.capacity_memory_gib_hours(w, STEP),
                *(f.hours_present(src, w, STEP) for src in f.sources()),
            ]
            ours, bare = [], []
            usage = None
            for _ in range(args.runs):  # alternated, so both see the same page cache and load
                began = time.perf_counter()
                usage = asyncio.run(fairness.week_usage(T0, end, STEP))
                ours.append(time.perf_counter() - began)
                bare.append(_bare(url, exprs, end))
            reader.close()
        finally:
            stop(proc)
    assert usage is not None and usage.cluster is not None
    load = os.getloadavg()
    print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (2 cores)")
    print(
        f"teams read: {len(usage.teams)}; coverage: "
        + ", ".join(f"{c.name} {c.fraction:.0%}" for c in usage.coverage)
    )
    print(
        f"week_usage (adapter, {len(exprs)} queries): first {ours[0]:.2f} s, median {statistics.median(ours):.2f} s"
    )
    print(
        f"reference (same queries, httpx, no adapter): first {bare[0]:.2f} s, median {statistics.median(bare):.2f} s"
    )
    print(
        "target: the report ≤ 10 s end to end (the history and computation half is g6's, joined after the merge)"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
