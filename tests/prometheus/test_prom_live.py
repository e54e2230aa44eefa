"""A real Prometheus scraping DCGM- and KSM-shaped exporters on loopback: idle vs busy, MIG, label spellings."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.prometheus.prom_exposition import Device, KsmPod, dcgm_text, ksm_text
from tests.prometheus.prom_server import HTTPServer, PrometheusProcess, metrics_route
from tests.prometheus.prom_snapshots import snapshot_waiting
from watchtower.adapters.prometheus.reader import PrometheusQueryError, PrometheusReader
from watchtower.config.model import Settings
from watchtower.domain.gpu_usage import IdlePolicy
from watchtower.domain.promql.exporters import ExporterQueries
from watchtower.domain.workloads import WorkloadKey
from watchtower.services.gpu_usage import GpuUsageService

SCRAPE = 1.0
WINDOW = 6.0  # ≥ 4 scrapes
VARIANTS = ("plain", "lower", "compat", "exported")


def _bursty(scrape: int) -> float:
    return 95.0 if scrape % 3 == 0 else 0.0


def _devices(ns: str, host: str) -> list[Device]:
    return [
        Device(0, host, pod="idle-0", namespace=ns, util=2.0),
        Device(1, host, pod="idle-0", namespace=ns, util=0.0),
        Device(2, host, pod="busy-0", namespace=ns, util=85.0),
        Device(3, host, pod="bursty-0", namespace=ns, util=_bursty),
        Device(4, host, util=0.0),  # no pod uses it: not allocated, never "idle-allocated"
    ]


MIG = [
    Device(0, "mig-node", pod="mig-idle-0", namespace="mig", profile="1g.10gb", instance="7", util=1.0),
    Device(0, "mig-node", pod="mig-idle-0", namespace="mig", profile="1g.10gb", instance="8", util=3.0),
    Device(0, "mig-node", pod="mig-busy-0", namespace="mig", profile="3g.40gb", instance="1", util=70.0),
]


def _pods() -> list[KsmPod]:
    pods = []
    for v in VARIANTS:
        ns = f"v-{v}"
        pods += [
            KsmPod(ns, "idle-0", 2, owner_name="idle-job"),
            KsmPod(ns, "busy-0", 1, owner_name="busy-job"),
            KsmPod(ns, "bursty-0", 1, owner_kind="", owner_name=""),
        ]
    pods += [
        KsmPod("mig", "mig-idle-0", 2, owner_kind="Job", owner_name="mig-idle"),
        KsmPod("mig", "mig-busy-0", 1, owner_kind="Job", owner_name="mig-busy"),
        KsmPod("v-plain", "gone-0", 1, owner_name="gone-job", phase="Succeeded"),
        # a namespace KSM reports no kube_namespace_labels for: its own team, never dropped from team sums
        KsmPod("unlabelled", "solo-0", 1, owner_kind="Job", owner_name="solo"),
    ]
    return pods


def _config(exporter: str) -> str:
    host = exporter.removeprefix("http://")
    jobs = [("kube-state-metrics", "/ksm", True, {})]
    jobs += [(f"dcgm-{v}", f"/dcgm/{v}", v != "exported", {}) for v in VARIANTS]
    jobs[-1] = (
        "dcgm-exported",
        "/dcgm/exported",
        False,
        {"pod": "dcgm-exporter-x7", "namespace": "gpu-operator"},
    )
    jobs.append(("dcgm-mig", "/dcgm/mig", True, {}))
    out = [f"global:\n  scrape_interval: {SCRAPE:g}s\n  evaluation_interval: {SCRAPE:g}s\nscrape_configs:"]
    for name, path, honor, labels in jobs:
        lbl = "".join(f"\n          {k}: {v}" for k, v in labels.items())
        out.append(
            f"  - job_name: {name}\n    metrics_path: {path}\n    honor_labels: {str(honor).lower()}\n"
            f"    static_configs:\n      - targets: ['{host}']" + (f"\n        labels:{lbl}" if lbl else "")
        )
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, real_prometheus: None):
    scrapes: dict[str, int] = {}

    def dcgm(variant: str):
        def render() -> str:
            n = scrapes[variant] = scrapes.get(variant, -1) + 1
            if variant == "mig":
                return dcgm_text(MIG, scrape=n)
            spelling = "plain" if variant == "exported" else variant
            return dcgm_text(_devices(f"v-{variant}", f"node-{variant}"), spelling=spelling, scrape=n)

        return render

    routes = {f"/dcgm/{v}": metrics_route(dcgm(v)) for v in (*VARIANTS, "mig")}
    namespaces = {f"v-{v}": None for v in VARIANTS} | {"v-plain": "vision", "mig": "nlp"}
    routes["/ksm"] = metrics_route(lambda: ksm_text(_pods(), namespaces))
    exporter = HTTPServer(routes).start()
    tmp = tmp_path_factory.mktemp("prom-live")
    prom = PrometheusProcess(config=_config(exporter.url), data_dir=tmp / "data")
    prom.start()
    reader = PrometheusReader(url=prom.url, timeout=10, retries=1, backoff=0.2)
    try:
        # Wait until every job has been scraped for longer than the window (no figure is asserted on time).
        first = None
        while True:
            got = reader.query_sync(
                "count(up == 1) >= 6 and count(count by (job) (DCGM_FI_PROF_GR_ENGINE_ACTIVE)) >= 5"
            )
            if got and first is None:
                first = time.time()
            if first is not None and time.time() - first > WINDOW + 3 * SCRAPE:
                break
            time.sleep(0.5)
        yield prom, reader
    finally:
        reader.close()
        prom.stop()
        exporter.stop()


def _service(reader: PrometheusReader, window: float = WINDOW) -> GpuUsageService:
    settings = Settings()
    return GpuUsageService(
        reader=reader,
        queries=ExporterQueries(),
        policy=IdlePolicy(threshold=10.0, window=window, slack=SCRAPE),
        tiers=settings.tier_policy(),
        step=SCRAPE,
        every=0.0,
        class_priority=lambda: {"batch": 100_000, "urgent-debug": 1_000_000},
    )


def test_idle_pod_detected_busy_and_bursty_pods_not_in_every_label_spelling(live) -> None:
    _, reader = live
    svc = _service(reader)
    view = asyncio.run(svc.refresh(time.time()))
    assert view is not None and not view.stale
    idle = {w.key: w for w in view.idle()}
    for v in VARIANTS:
        key = WorkloadKey(f"v-{v}", "PaddleJob", "idle-job")
        assert key in idle, f"{v}: idle pod not found; idle = {sorted(map(str, idle))}"
        assert idle[key].idle_gpus == 2 and idle[key].idle_slices == 0
        assert WorkloadKey(f"v-{v}", "PaddleJob", "busy-job") not in idle
        assert WorkloadKey(f"v-{v}", "Pod", "bursty-0") not in idle
    by_key = {w.key: w for w in view.workloads}
    assert by_key[WorkloadKey("v-plain", "PaddleJob", "busy-job")].gpus == 1
    # the exporter's own pod label (exported variant) and the finished pod never count as allocations
    assert all(w.key.namespace != "gpu-operator" for w in view.workloads)
    assert WorkloadKey("v-plain", "PaddleJob", "gone-job") not in by_key


def test_mig_slices_are_counted_as_slices_not_gpus(live) -> None:
    _, reader = live
    view = asyncio.run(_service(reader).refresh(time.time()))
    assert view is not None
    w = {w.key: w for w in view.workloads}
    idle = w[WorkloadKey("mig", "Job", "mig-idle")]
    assert (idle.idle_slices, idle.idle_gpus, idle.slices, idle.gpus) == (2, 0, 2, 0)
    assert idle.idle_gpu_equivalent == pytest.approx(2 / 7)
    busy = w[WorkloadKey("mig", "Job", "mig-busy")]
    assert (busy.idle_slices, busy.slices) == (0, 1)


def test_devices_seen_for_less_than_the_window_are_not_called_idle(live) -> None:
    _, reader = live
    view = asyncio.run(_service(reader, window=3600.0).refresh(time.time()))
    assert view is not None and view.workloads
    assert view.idle() == []


def test_idle_gpus_while_a_higher_tier_waits_raise_one_alert_per_workload(live) -> None:
    _, reader = live
    svc = _service(reader)
    now = time.time()
    snap = snapshot_waiting(now, namespace="v-plain", name="urgent", priority=900_000, waited=600)
    asyncio.run(svc.on_snapshot(snap, now))
    alerts = [a for a in svc.alerts() if a.name == "GPUIdleWhileQueueWaits"]
    names = sorted(a.labels["workload"] for a in alerts)
    # four spellings × idle-job + the MIG job: each workload once, never per pod or per GPU
    assert names == ["idle-job"] * 4 + ["mig-idle"]
    plain = next(a for a in alerts if a.labels["namespace"] == "v-plain")
    assert plain.labels["team"] == "v-plain" and plain.labels["tier"] == "low"
    report = svc.report()
    assert report["idle_gpus"] == 8 and report["idle_slices"] == 2 and not report["stale"]
    assert {x["name"] for x in report["idle_while_waiting"]} == {"idle-job", "mig-idle"}


def test_every_catalogued_query_runs_on_the_real_prometheus(live) -> None:
    _, reader = live
    q = ExporterQueries()
    results = {
        n.name: reader.query_sync(n.expr)
        for n in q.catalogue(window=WINDOW, step=SCRAPE, threshold=10.0, history=60.0)
    }
    empty = sorted(name for name, r in results.items() if not r)
    assert empty == [], f"queries with no result: {empty}"
    teams = {s.labels["team"]: s.value for s in results["team_gpus_allocated"]}
    # v-plain carries label team=vision; the other namespaces have no team label and are their own team
    assert teams["vision"] == 4 and teams["v-lower"] == 4 and teams["nlp"] == 3 and teams["unlabelled"] == 1
    cluster = results["cluster_gpus_allocated"][0].value
    assert cluster == 4 * 4 + 3 + 1


def test_queries_run_side_by_side_come_back_in_order_and_leave_no_session_open(live) -> None:
    """The subquery path of the fairness report sends its pieces two at a time: each answer must be its own
    query's, a failure must reach the caller, and the sessions of the ended worker threads are closed."""
    _, reader = live
    asked = [(f"vector({i})", time.time()) for i in range(12)]
    got = reader.query_each_sync(asked, workers=3)
    assert [s[0].value for s in got] == [float(i) for i in range(12)]
    assert all(t.is_alive() for t, _ in reader._clients), "a finished worker's session was kept"
    with pytest.raises(PrometheusQueryError):
        reader.query_each_sync([("vector(1)", time.time()), ("sum(", time.time())], workers=2)
    assert all(t.is_alive() for t, _ in reader._clients)
