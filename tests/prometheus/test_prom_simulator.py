"""A real Prometheus scraping the SIMULATOR's own exporter: Watchtower's figures against the simulator's truth.

The simulator is stepped to a state, then held still while Prometheus scrapes it in real time: its exporter
renders utilisation for the simulated instant, so every scrape sees the same figures. The truth each test
compares with is the simulator's own (which workloads it made idle) and the live model (the ClusterState fed
by the same simulator's LIST and watch stream), never a figure read back from Prometheus.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
import pytest

from tests.prometheus.prom_server import SimExporter
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.adapters.prometheus.process import start_local_prometheus
from watchtower.adapters.prometheus.reader import PrometheusReader
from watchtower.commands.demo.warm import demo_cluster
from watchtower.config.model import Settings, SimulatorConfig
from watchtower.domain.gpu_usage import IDLE_ALERT, IdlePolicy, UsageView
from watchtower.domain.promql.exporters import ExporterQueries
from watchtower.domain.queue import QueueEvaluator, QueueSnapshot
from watchtower.domain.state import ClusterState
from watchtower.domain.workloads import WorkloadKey
from watchtower.services.gpu_usage import GpuUsageService
from watchtower.services.ingest import Ingestor
from watchtower.simulator.cluster import DEFAULT_START, KINDS, SimulatedCluster
from watchtower.simulator.workloads import Pattern, paddle_job, single_pod

SCRAPE = 1.0
WINDOW = 6.0  # ≥ 4 scrapes
# 12:45 UTC: the simulator's bursty (serving) pattern follows daily traffic and peaks early afternoon, far
# above the idle threshold, so "idle" below means only what the simulator made idle.
MIDDAY = DEFAULT_START + 12.75 * 3600


class LiveModel:
    """The simulator feeding a ClusterState as the service does: a LIST of every kind, then each change."""

    def __init__(self, sim: SimulatedCluster) -> None:
        self.sim = sim
        self.state = ClusterState()
        self.ingest = Ingestor(self.state, ObjectDecoder())
        for kind in KINDS:
            self.ingest.list_page(kind, [msgspec.Raw(b) for b in sim.list_objects(kind)])

    def step(self, dt: float) -> None:
        self.sim.step(dt)
        for kind, type_, raw in self.sim.drain():
            self.ingest.apply(kind, type_, raw)

    def snapshot(self) -> QueueSnapshot:
        return QueueEvaluator(Settings().queue_policy()).evaluate(
            self.state, now=self.sim.now(), include_running=True
        )

    def running_gpus_per_team(self) -> dict[str, float]:
        out: Counter[str] = Counter()
        for p in self.state.pods.values():
            if p.phase == "Running" and p.gpus:
                out[self.state.team_of(p.namespace)] += p.gpus
        return {t: float(n) for t, n in out.items()}


def made_idle(sim: SimulatedCluster) -> set[WorkloadKey]:
    """The workloads the simulator gives the idle pattern that have a running pod holding GPUs."""
    out = set()
    for p in sim.live_pods():
        if p.pattern is Pattern.IDLE and p.phase == "Running" and p.gpus:
            kind, name = (p.owner["kind"], p.owner["name"]) if p.owner else ("Pod", p.name)
            out.add(WorkloadKey(p.namespace, kind, name))
    return out


@contextmanager
def scraped(sim: SimulatedCluster, workdir: Path) -> Iterator[PrometheusReader]:
    """Serve the simulator's exporter, let a real Prometheus scrape it for longer than the window."""
    exporter = SimExporter(sim).start()
    prom = None
    reader = None
    try:
        prom = start_local_prometheus(exporter_port=exporter.port, scrape_interval=SCRAPE, workdir=workdir)
        assert prom is not None, "the real_prometheus fixture checked the binary is there"
        reader = PrometheusReader(url=prom.url, timeout=10, retries=1, backoff=0.2)
        first = None
        while True:  # bounded by pytest's timeout; no figure depends on how long this takes
            got = reader.query_sync(
                'count(up{job=~"dcgm-exporter|kube-state-metrics"} == 1) == 2 '
                "and count(DCGM_FI_DEV_GPU_UTIL) > 0 and count(kube_pod_status_phase) > 0"
            )
            if got and first is None:
                first = time.time()
            if first is not None and time.time() - first > WINDOW + 3 * SCRAPE:
                break
            time.sleep(0.5)
        yield reader
    finally:
        if reader is not None:
            reader.close()
        if prom is not None:
            prom.stop()
        exporter.stop()


def service(reader: PrometheusReader, model: LiveModel) -> GpuUsageService:
    settings = Settings()
    return GpuUsageService(
        reader=reader,
        queries=ExporterQueries(),
        policy=IdlePolicy(threshold=10.0, window=WINDOW, slack=SCRAPE),
        tiers=settings.tier_policy(),
        step=SCRAPE,
        every=0.0,
        team_of=model.state.team_of,
        workload_of=model.state.control.workload_of_controller,  # as bootstrap wires it
    )


def refreshed(svc: GpuUsageService) -> UsageView:
    view = asyncio.run(svc.refresh(time.time()))
    assert view is not None and not view.stale
    return view


# --- a scripted cluster: every workload placed by hand -----------------------------------------------------


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory, real_prometheus: None):
    cfg = SimulatorConfig(
        seed=5,
        nodes=3,
        gpus_per_node=8,
        cordoned_nodes=0,
        arrivals_per_hour=0,
        team_gpu_quota=0,
        teams=["a", "b"],
        warm_start=False,
    )
    sim = SimulatedCluster(cfg, start=MIDDAY)
    model = LiveModel(sim)
    forever = 1e7
    sim.submit(
        paddle_job(
            name="train-idle",
            team="a",
            priority_class="batch",
            workers=2,
            gpus_per_worker=4,
            duration=forever,
            pattern=Pattern.IDLE,
        )
    )
    sim.submit(
        single_pod(kind="Job", name="batch-busy", team="a", priority_class="batch", gpus=4, duration=forever)
    )
    sim.submit(
        single_pod(
            kind="ReplicaSet",
            name="serve-7d9f8b6c5",
            team="b",
            priority_class="online-serving",
            gpus=1,
            replicas=2,
            duration=forever,
            pattern=Pattern.BURSTY,
        )
    )
    sim.submit(
        single_pod(
            kind="Pod",
            name="exp-idle",
            team="b",
            priority_class="experiment",
            gpus=1,
            duration=forever,
            pattern=Pattern.IDLE,
        )
    )
    sim.submit(
        paddle_job(
            name="train-busy",
            team="b",
            priority_class="batch",
            workers=2,
            gpus_per_worker=2,
            duration=forever,
        )
    )
    model.step(900)
    # Submitted once the rest runs: two whole-node workers cannot fit in the 5 GPUs left, and long-training
    # never preempts (preemptionPolicy Never), so it waits, in the low tier.
    sim.submit(
        paddle_job(
            name="train-waits",
            team="b",
            priority_class="long-training",
            workers=2,
            gpus_per_worker=8,
            duration=forever,
        )
    )
    model.step(300)
    gpu_pods = [p for p in sim.live_pods() if p.gpus and not p.name.startswith("train-waits")]
    assert all(p.phase == "Running" for p in gpu_pods), "scenario set-up: every placed pod runs"
    with scraped(sim, tmp_path_factory.mktemp("prom-sim-scripted")) as reader:
        yield sim, model, reader


def test_idle_report_names_exactly_the_workloads_the_simulator_made_idle(scripted) -> None:
    sim, model, reader = scripted
    view = refreshed(service(reader, model))
    expected = {WorkloadKey("team-a", "PaddleJob", "train-idle"), WorkloadKey("team-b", "Pod", "exp-idle")}
    assert made_idle(sim) == expected
    idle = {w.key: w for w in view.idle()}
    assert set(idle) == expected
    assert idle[WorkloadKey("team-a", "PaddleJob", "train-idle")].idle_gpus == 8
    assert idle[WorkloadKey("team-b", "Pod", "exp-idle")].idle_gpus == 1
    # busy training and daytime serving hold GPUs too, and are seen, but are not idle
    seen = {w.key for w in view.workloads}
    assert WorkloadKey("team-a", "Job", "batch-busy") in seen
    assert WorkloadKey("team-b", "Deployment", "serve") in seen
    assert WorkloadKey("team-b", "PaddleJob", "train-busy") in seen
    assert view.unmonitored_pods == ()


def test_idle_alert_only_for_the_idle_workload_whose_tier_the_waiting_one_equals(scripted) -> None:
    _, model, reader = scripted
    svc = service(reader, model)
    snap = model.snapshot()
    assert [(w.key.name, w.tier) for w in snap.waiting()] == [("train-waits", "low")]
    asyncio.run(svc.on_snapshot(snap, time.time()))
    alerts = [a for a in svc.alerts() if a.name == IDLE_ALERT]
    # train-idle (batch, low tier) blocks low-tier work; exp-idle (experiment, medium) is reported, not alerted
    assert [(a.labels["namespace"], a.labels["workload"], a.labels["team"]) for a in alerts] == [
        ("team-a", "train-idle", "a")
    ]
    assert alerts[0].annotations["waiting"] == "team-b/PaddleJob/train-waits"
    report = svc.report()
    assert {w["name"] for w in report["idle_workloads"]} == {"train-idle", "exp-idle"}
    assert report["idle_gpus"] == 9


def test_gpu_allocation_per_team_from_kube_state_metrics_matches_the_live_model(scripted) -> None:
    _, model, reader = scripted
    q = ExporterQueries()
    truth = model.running_gpus_per_team()
    assert truth == {"a": 12.0, "b": 7.0}
    teams = {s.labels["team"]: s.value for s in reader.query_sync(q.team_gpus_allocated())}
    assert teams == truth
    (cluster,) = reader.query_sync(q.cluster_gpus_allocated())
    assert cluster.value == sum(truth.values())


# --- the seeded default cluster: warm start, random arrivals, preemptions ----------------------------------


def test_seeded_default_cluster_idle_workloads_and_team_allocation_match_the_simulator(
    tmp_path: Path, real_prometheus: None
) -> None:
    sim = demo_cluster(SimulatorConfig(seed=11), start=MIDDAY - 1800)
    model = LiveModel(sim)
    model.step(1800)
    truth_idle = made_idle(sim)
    truth_alloc = model.running_gpus_per_team()
    assert truth_idle and len(truth_alloc) >= 2, "scenario set-up: idle workloads and several teams"
    with scraped(sim, tmp_path / "prom") as reader:
        view = refreshed(service(reader, model))
        assert {w.key for w in view.idle()} == truth_idle
        teams = {
            s.labels["team"]: s.value for s in reader.query_sync(ExporterQueries().team_gpus_allocated())
        }
        assert teams == truth_alloc
