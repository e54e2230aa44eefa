"""A small known week as OpenMetrics, for `promtool tsdb create-blocks-from openmetrics`: three teams, known
allocations and idle periods, a cordoned node, a node not Ready, work waiting while GPUs were free, and a
gap of six hours in which no source sent anything. The figures the fairness reader must return are worked
out by hand below (EXPECTED_*).

Every time below is an offset from the week's start: `openmetrics(t0)` lays the same week out from any `t0`
that is a multiple of 300 s (the default T0, or an ISO Monday 00:00 for the whole report), and the figures
do not depend on it.

Samples are taken every minute, 30 s after the minute of t0 (a multiple of 300 s): the reader's 5-minute
steps never fall on a sample, so each step sees the one sample 30 s before it, whatever side of a range's
edge Prometheus 2 and 3 count. Every change happens on a step, so an integral is exact: a pod running in
[start, end) is counted at the (end − start) / 300 steps after its start, each worth 5 minutes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

T0 = 1_700_000_100  # a multiple of 300 s: the default start
H = 3600
DAY = 24 * H
WEEK = 7 * DAY
END = T0 + WEEK
SAMPLE = 60
OFFSET = 30
STEP = 300.0
THETA = 10.0
GIB = 2**30
GAP = (4 * DAY, 4 * DAY + 6 * H)  # nothing scraped: KSM, DCGM and Watchtower all absent
KSM = 'job="kube-state-metrics"'
OWN = 'job="watchtower",instance="watchtower:8080"'


@dataclass(frozen=True)
class PodRun:
    namespace: str
    pod: str
    node: str
    gpus: tuple[int, ...]  # device indexes on the node
    cpu: int
    memory_gib: int
    start: int  # offsets from the week's start
    end: int  # runs in [start, end)
    util: Callable[[float], float]  # of the offset


NODES = ("n1", "n2", "n3")  # 8 GPUs, 64 cores, 512 GiB each
NODE_GPUS, NODE_CPU, NODE_MEMORY_GIB = 8, 64, 512
CORDONED = {"n3": (2 * DAY, 3 * DAY)}
NOT_READY = {"n1": (5 * DAY, 5 * DAY + 2 * H)}
NAMESPACES = {"vision-train": "vision", "nlp": None, "speech": "speech"}  # nlp: no team label, its own team
PODS = (
    PodRun("vision-train", "a-0", "n1", tuple(range(8)), 32, 256, 0, 3 * DAY, lambda t: 90.0),
    PodRun("vision-train", "b-0", "n2", (0, 1, 2, 3), 16, 64, 3 * DAY, WEEK, lambda t: 3.0),
    PodRun(
        "nlp",
        "c-0",
        "n2",
        (4, 5, 6, 7),
        16,
        128,
        DAY,
        6 * DAY,
        lambda t: 50.0 if t < 2 * DAY else 5.0,
    ),
    PodRun("speech", "d-0", "n3", (0, 1), 8, 32, 12 * H, 2 * DAY, lambda t: 60.0),
)
# (namespace, hard GPUs, from) pieces: nlp's quota is cut from 16 to 8 after three days; speech has none.
QUOTAS = {"vision-train": [(16, 0)], "nlp": [(16, 0), (8, 3 * DAY)]}
# speech waits for 12 GPUs in [5 d, 5 d + 4 h): free are n3's 8 (n1 not Ready) for 2 h, then n1's too.
WAITING = [("speech", "low", 12, 5 * DAY, 5 * DAY + 4 * H)]

# By hand. The gap removes 6 h from whatever runs through it (b-0, c-0 and every node): 168 h − 6 h = 162 h
# of data. GPU-hours: vision a-0 8 × 72 h + b-0 4 × (96 − 6) h = 576 + 360; nlp c-0 4 × (120 − 6) h;
# speech d-0 2 × 36 h. Idle (mean utilisation over each step under 10 %): b-0 all along, 4 × 90 h; c-0 from
# 2 d on (the first idle step is the one 5 minutes after the switch, and stands for those 5 minutes):
# 4 × (96 − 6) h; a-0 and d-0 are busy.
EXPECTED_TEAMS = {
    "vision": {
        "gpu_hours": 936.0,
        "idle_gpu_hours": 360.0,
        "cpu_core_hours": 32 * 72 + 16 * 90,
        "memory_gib_hours": 256 * 72 + 64 * 90,
        "quota_gpus": 16.0,
    },
    "nlp": {
        "gpu_hours": 456.0,
        "idle_gpu_hours": 360.0,
        "cpu_core_hours": 16 * 114,
        "memory_gib_hours": 128 * 114,
        # 16 for the 864 steps of the first 3 days, 8 for the 1080 present steps after: a time average
        # over the steps with data (the gap is not averaged in as 0).
        "quota_gpus": (16 * 864 + 8 * 1080) / 1944,
    },
    "speech": {
        "gpu_hours": 72.0,
        "idle_gpu_hours": 0.0,
        "cpu_core_hours": 8 * 36.0,
        "memory_gib_hours": 32 * 36.0,
        "quota_gpus": None,
    },
}
EXPECTED_CLUSTER = {
    "capacity_gpu_hours": 24 * 162.0,
    "allocated_gpu_hours": 936.0 + 456.0 + 72.0,
    "idle_allocated_gpu_hours": 720.0,
    "free_while_waiting_gpu_hours": 8 * 2 + 12 * 2.0,  # min(free, waiting): min(8, 12), then min(16, 12)
    "unavailable_gpu_hours": 8 * 24 + 8 * 2.0,  # n3 cordoned a day, n1 not Ready two hours
    "cpu_core_hours": 3 * 64 * 162.0,
    "memory_gib_hours": 3 * 512 * 162.0,
    "capacity_gpus": 24.0,
}
EXPECTED_HOURS_PRESENT = 162.0  # of 168, for each of the three sources


def _offsets(sample: int, offset: float) -> list[float]:
    """Sample offsets from the week's start: `offset` s after each `sample`-second tick (changes fall on
    300 s steps, so any sample dividing 300 and offset under it give the same hand figures)."""
    return [t + offset for t in range(0, WEEK, sample) if not GAP[0] <= t + offset < GAP[1]]


def _stamp(t: float) -> str:
    return str(int(t)) if float(t).is_integer() else f"{t:.3f}"


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _inside(t: float, span: tuple[int, int] | None) -> bool:
    return span is not None and span[0] <= t < span[1]


def openmetrics(t0: int = T0, sample: int = SAMPLE, offset: float = OFFSET) -> str:
    """Return the week starting at `t0` as an OpenMetrics text (gauges; every series' samples together, in
    time order)."""
    if t0 % int(STEP):
        raise ValueError(f"t0 must be a multiple of {STEP:g} s for the integrals to be exact: {t0}")
    times = _offsets(sample, offset)  # a sample's timestamp is t0 + its offset
    families: dict[str, list[tuple[str, list[tuple[float, float]]]]] = {}

    def series(name: str, labels: str, samples: list[tuple[float, float]]) -> None:
        if samples:
            families.setdefault(name, []).append((labels, samples))

    for node in NODES:
        base = f'{KSM},node="{node}"'
        for resource, unit, v in (
            ("nvidia_com_gpu", "integer", NODE_GPUS),
            ("cpu", "core", NODE_CPU),
            ("memory", "byte", NODE_MEMORY_GIB * GIB),
        ):
            series(
                "kube_node_status_allocatable",
                f'{base},resource="{resource}",unit="{unit}"',
                [(t, v) for t in times],
            )
        cordon, down = CORDONED.get(node), NOT_READY.get(node)
        series("kube_node_spec_unschedulable", base, [(t, float(_inside(t, cordon))) for t in times])
        for status, ready in (("true", True), ("false", False)):
            series(
                "kube_node_status_condition",
                f'{base},condition="Ready",status="{status}"',
                [(t, float((not _inside(t, down)) == ready)) for t in times],
            )
    for ns, team in NAMESPACES.items():
        extra = f',label_team="{team}"' if team else ""
        series("kube_namespace_labels", f'{KSM},namespace="{ns}"{extra}', [(t, 1.0) for t in times])
    for ns, pieces in QUOTAS.items():
        base = f'{KSM},namespace="{ns}",resourcequota="gpu",resource="requests.nvidia.com/gpu"'

        def hard(t: float, pieces: list[tuple[int, int]] = pieces) -> float:
            return float([v for v, since in pieces if since <= t][-1])

        series("kube_resourcequota", f'{base},type="hard"', [(t, hard(t)) for t in times])
        series("kube_resourcequota", f'{base},type="used"', [(t, 0.0) for t in times])
    for p in PODS:
        base = f'{KSM},namespace="{p.namespace}",pod="{p.pod}",uid="uid-{p.pod}"'
        series(
            "kube_pod_status_phase",
            f'{base},phase="Running"',
            [(t, float(p.start <= t < p.end)) for t in times],
        )
        for resource, unit, v in (
            ("nvidia_com_gpu", "integer", len(p.gpus)),
            ("cpu", "core", p.cpu),
            ("memory", "byte", p.memory_gib * GIB),
        ):
            series(
                "kube_pod_container_resource_requests",
                f'{base},container="main",node="{p.node}",resource="{resource}",unit="{unit}"',
                [(t, v) for t in times],
            )
    # DCGM reports every GPU; one used by a running pod carries the pod's labels meanwhile.
    for node in NODES:
        for g in range(NODE_GPUS):
            dev = f'job="dcgm-exporter",gpu="{g}",UUID="GPU-{node}-{g}",Hostname="{node}"'
            users = [p for p in PODS if p.node == node and g in p.gpus]
            series(
                "DCGM_FI_DEV_GPU_UTIL",
                dev,
                [(t, 0.0) for t in times if not any(p.start <= t < p.end for p in users)],
            )
            for p in users:
                series(
                    "DCGM_FI_DEV_GPU_UTIL",
                    f'{dev},container="main",namespace="{p.namespace}",pod="{p.pod}"',
                    [(t, p.util(t)) for t in times if p.start <= t < p.end],
                )
    for team, tier, gpus, since, until in WAITING:
        series(
            "watchtower_waiting_gpus",
            f'{OWN},team="{team}",tier="{tier}"',
            [(t, float(gpus if since <= t < until else 0)) for t in times],
        )
    series("watchtower_last_evaluation_timestamp_seconds", OWN, [(t, float(t0 + t)) for t in times])

    lines: list[str] = []
    for name, group in families.items():
        lines.append(f"# TYPE {name} gauge")
        for labels, samples in group:
            lines.extend(f"{name}{{{labels}}} {_num(v)} {_stamp(t0 + t)}" for t, v in samples)
    lines.append("# EOF")
    return "\n".join(lines) + "\n"
