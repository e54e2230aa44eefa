"""A week of history loaded with `promtool tsdb create-blocks-from openmetrics`, read back by the real
Prometheus; every expected figure is worked out by hand below."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.prometheus.prom_server import PrometheusProcess
from watchtower.adapters.prometheus.reader import PrometheusReader
from watchtower.domain.promql.exporters import ExporterQueries

T0 = 1_700_000_100  # a multiple of 300 s, so query steps fall on sample times
H = 3600
DAY = 24 * H
WEEK = 7 * DAY
END = T0 + WEEK  # the query time
SAMPLE = 60
STEP = 300
THETA = 10.0

# (namespace, pod, gpus, start, end, utilisation at t): a pod runs in [start, end)
PODS = [
    ("vision-train", "a-0", 2, T0 + 1 * H, T0 + 49 * H, lambda t: 90.0),
    ("vision-train", "b-0", 1, T0 + 2 * DAY, T0 + 5 * DAY, lambda t: 3.0),
    ("nlp", "c-0", 2, T0 + 1 * H, T0 + 6 * DAY, lambda t: 50.0 if t < T0 + 101 * H else 5.0),
]
NAMESPACES = {"vision-train": "vision", "nlp": None}  # nlp has no team label: its team is its name

# GPU-hours = GPUs × hours running:
#   vision: a-0 2 × 48 h + b-0 1 × 72 h = 168;  nlp: c-0 2 × 143 h = 286.
# Idle GPU-hours (mean utilisation over each 5-minute step under 10 %):
#   vision: b-0 idle all along: 1 × 72 h = 72 (a-0 is busy).
#   nlp: c-0 drops to 5 % at start + 100 h; the step at the switch still averages in the 50 % samples of the
#   5 minutes before it, so it is idle from 100 h + 5 min to 143 h: 2 × (43 h − 5 min) = 85.8333…
EXPECTED_GPU_HOURS = {"vision": 168.0, "nlp": 286.0}
EXPECTED_IDLE_GPU_HOURS = {"vision": 72.0, "nlp": 2 * (43 - 5 / 60)}


def _openmetrics() -> str:
    ksm = 'job="kube-state-metrics"'
    lines: list[str] = []
    times = range(T0, END + 1, SAMPLE)

    def family(name: str, series: list[tuple[str, list[tuple[int, float]]]]) -> None:
        lines.append(f"# TYPE {name} gauge")
        for labels, samples in series:
            lines.extend(f"{name}{{{labels}}} {v:g} {t}" for t, v in samples)

    phase, req, util = [], [], []
    for ns, pod, gpus, start, end, fn in PODS:
        base = f'{ksm},namespace="{ns}",pod="{pod}",uid="uid-{pod}"'
        phase.append((f'{base},phase="Running"', [(t, float(start <= t < end)) for t in times]))
        req.append(
            (
                f'{base},container="main",node="n1",resource="nvidia_com_gpu",unit="integer"',
                [(t, gpus) for t in times],
            )
        )
        for g in range(gpus):
            dev = f'job="dcgm",gpu="{g}",UUID="GPU-{pod}-{g}",Hostname="n1",container="main",namespace="{ns}",pod="{pod}"'
            util.append((dev, [(t, fn(t)) for t in times if start <= t < end]))
    nsl = []
    for ns, team in NAMESPACES.items():
        extra = f',label_team="{team}"' if team else ""
        nsl.append((f'{ksm},namespace="{ns}"{extra}', [(t, 1.0) for t in times]))
    family("kube_pod_status_phase", phase)
    family("kube_pod_container_resource_requests", req)
    family("kube_namespace_labels", nsl)
    family("DCGM_FI_DEV_GPU_UTIL", util)
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory, real_prometheus: None) -> Iterator[PrometheusReader]:
    tmp = tmp_path_factory.mktemp("prom-history")
    src = tmp / "week.om.txt"
    src.write_text(_openmetrics())
    data = tmp / "data"
    subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(src), str(data)],
        check=True,
        capture_output=True,
    )
    prom = PrometheusProcess(config="global:\n  scrape_interval: 1m\n", data_dir=data)
    prom.start()
    reader = PrometheusReader(url=prom.url, timeout=60, retries=1)
    try:
        yield reader
    finally:
        reader.close()
        prom.stop()


def _by_team(reader: PrometheusReader, expr: str) -> dict[str, float]:
    return {s.labels["team"]: s.value for s in reader.query_sync(expr, at=END)}


def test_gpu_hours_per_team_over_a_week_match_the_hand_count(history: PrometheusReader) -> None:
    got = _by_team(history, ExporterQueries().team_gpu_hours(WEEK, STEP))
    assert got == pytest.approx(EXPECTED_GPU_HOURS)


def test_idle_gpu_hours_per_team_over_a_week_match_the_hand_count(history: PrometheusReader) -> None:
    got = _by_team(history, ExporterQueries().team_idle_device_hours(WEEK, STEP, THETA))
    assert got == pytest.approx(EXPECTED_IDLE_GPU_HOURS)


def test_no_mig_slice_hours_when_only_whole_gpus_ran(history: PrometheusReader) -> None:
    assert _by_team(history, ExporterQueries().team_idle_device_hours(WEEK, STEP, THETA, kind="slice")) == {}


def test_allocation_at_a_past_instant_sees_only_the_pods_running_then(history: PrometheusReader) -> None:
    q = ExporterQueries()
    at = T0 + 3 * DAY  # a-0 has ended, b-0 and c-0 run
    got = {
        (s.labels["namespace"], s.labels["pod"]): s.value
        for s in history.query_sync(q.pod_gpus_allocated(), at=at)
    }
    assert got == {("vision-train", "b-0"): 1.0, ("nlp", "c-0"): 2.0}
