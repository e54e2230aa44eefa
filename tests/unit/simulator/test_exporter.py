"""The simulator's /metrics: parsed by prometheus_client's own parser, served by a real HTTP server."""

import asyncio

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.unit.simulator.helpers import pods, small
from watchtower.adapters.kube.decoder import parse_time
from watchtower.commands.demo.warm import demo_cluster
from watchtower.config.model import SimulatorConfig
from watchtower.simulator.exporter import CONTENT_TYPE, utilisation
from watchtower.simulator.workloads import Pattern, single_pod

DCGM_LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"]
DCGM = [
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
]
KSM = [
    "kube_pod_info",
    "kube_pod_owner",
    "kube_pod_status_phase",
    "kube_pod_status_scheduled",
    "kube_pod_created",
    "kube_pod_start_time",
    "kube_pod_status_scheduled_time",
    "kube_pod_container_resource_requests",
    "kube_node_status_allocatable",
    "kube_resourcequota",
    "kube_pod_status_reason",
]


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_the_text_parses_and_has_every_series_with_help_and_type():
    sim = demo_cluster(SimulatorConfig(seed=2))
    text = sim.render_metrics()
    fams = families(text)
    for name in DCGM + KSM:
        assert name in fams, name
        assert fams[name].type == "gauge" and fams[name].documentation
        assert f"# TYPE {name} gauge" in text


def test_dcgm_labels_come_in_the_exporters_order_and_pod_labels_only_on_used_gpus():
    sim = small(1)
    sim.submit(single_pod(kind="Job", name="j", team="a", priority_class="batch", gpus=2, duration=1e6))
    sim.step(300)
    job_pod = pods(sim, "j")[0]
    lines = [
        line
        for line in sim.render_metrics(which="dcgm").splitlines()
        if line.startswith("DCGM_FI_DEV_GPU_UTIL{")
    ]
    assert len(lines) == 8
    used = [line for line in lines if 'pod="' in line]
    assert len(used) == 2
    for line in lines:
        keys = [kv.split("=")[0] for kv in line[line.index("{") + 1 : line.index("}")].split('",')]
        expected = DCGM_LABELS + (["container", "namespace", "pod"] if 'pod="' in line else [])
        assert keys == expected, line
    assert f'namespace="team-a",pod="{job_pod.name}"' in used[0]
    fams = families(sim.render_metrics(which="dcgm"))
    busy = [s for s in fams["DCGM_FI_DEV_GPU_UTIL"].samples if s.labels.get("pod") == job_pod.name]
    assert all(s.value >= 80 for s in busy)
    assert all(s.value == 0 for s in fams["DCGM_FI_DEV_GPU_UTIL"].samples if "pod" not in s.labels)


def test_utilisation_patterns_differ_as_workloads_do():
    at = [1_767_225_600 + 15 * i for i in range(200)]
    busy = [utilisation(Pattern.BUSY, "u", 0, t) for t in at]
    idle = [utilisation(Pattern.IDLE, "u", 0, t) for t in at]
    bursty = [utilisation(Pattern.BURSTY, "u", 0, t) for t in at]
    assert min(busy) >= 80 and max(idle) < 10
    assert max(bursty) - min(bursty) > 20
    assert min(bursty) >= 12  # quiet at night, never idle by the default θ of 10 %


def test_kube_state_metrics_series_carry_the_real_label_sets():
    sim = small(1, quota=16)
    sim.submit(single_pod(kind="Job", name="j", team="a", priority_class="batch", gpus=2, duration=1e6))
    sim.step(300)
    p = pods(sim, "j")[0]
    fams = families(sim.render_metrics(which="kube-state-metrics"))

    def sample(name, **match):
        return [s for s in fams[name].samples if all(s.labels.get(k) == v for k, v in match.items())]

    base = {"namespace": "team-a", "pod": p.name, "uid": p.uid}
    (info,) = sample("kube_pod_info", **base)
    assert info.labels["node"] == "gpu-node-000" and info.labels["priority_class"] == "batch"
    assert info.labels["created_by_kind"] == "Job" and info.labels["created_by_name"] == "j"
    (owner,) = sample("kube_pod_owner", **base)
    assert owner.labels["owner_kind"] == "Job" and owner.labels["owner_is_controller"] == "true"
    phases = {s.labels["phase"]: s.value for s in sample("kube_pod_status_phase", **base)}
    assert phases == {"Pending": 0, "Running": 1, "Succeeded": 0, "Failed": 0, "Unknown": 0}
    (gpu,) = sample("kube_pod_container_resource_requests", **base, resource="nvidia_com_gpu")
    assert gpu.labels["unit"] == "integer" and gpu.value == 2 and gpu.labels["container"] == "main"
    (alloc,) = sample("kube_node_status_allocatable", node="gpu-node-000", resource="nvidia_com_gpu")
    assert alloc.value == 8
    # Memory in bytes, as kube-state-metrics converts the quantity: the report's memory share needs it.
    (mem,) = sample("kube_node_status_allocatable", node="gpu-node-000", resource="memory")
    assert mem.labels["unit"] == "byte" and mem.value == 768 * 2**30
    quota = {
        s.labels["type"]: s.value
        for s in sample("kube_resourcequota", namespace="team-a", resource="requests.nvidia.com/gpu")
    }
    assert quota == {"hard": 16, "used": 2}
    (sched,) = sample("kube_pod_status_scheduled", **base, condition="true")
    assert sched.value == 1
    (t,) = sample("kube_pod_status_scheduled_time", **base)
    assert t.value == parse_time(p.sched_cond["lastTransitionTime"])


def test_a_preempted_pod_shows_its_reason():
    sim = small(1)
    sim.submit(single_pod(kind="Job", name="cheap", team="a", priority_class="batch", gpus=8, duration=1e6))
    sim.step(60)
    sim.submit(
        single_pod(kind="Pod", name="debug", team="b", priority_class="urgent-debug", gpus=8, duration=60)
    )
    sim.step(10)
    fams = families(sim.render_metrics(which="kube-state-metrics"))
    reasons = [s.labels for s in fams["kube_pod_status_reason"].samples]
    assert [r["reason"] for r in reasons] == ["PreemptionByScheduler"] and reasons[0]["pod"].startswith(
        "cheap-"
    )


async def test_the_server_serves_prometheus_text_with_the_content_type_prometheus_3_requires():
    sim = demo_cluster(SimulatorConfig(seed=2))
    server = await sim.serve_metrics("127.0.0.1", 0)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client:
            r = await client.get("/metrics")
            assert r.status_code == 200 and r.headers["content-type"] == CONTENT_TYPE
            assert {"DCGM_FI_DEV_GPU_UTIL", "kube_pod_info"} <= families(r.text).keys()
            dcgm = await client.get("/metrics/dcgm")
            assert "kube_pod_info" not in families(dcgm.text)
            ksm = await client.get("/metrics/kube-state-metrics")
            assert "DCGM_FI_DEV_GPU_UTIL" not in families(ksm.text)
            assert (await client.get("/nope")).status_code == 404
            assert (await client.post("/metrics")).status_code == 405
            # A client that sends half a request and hangs up does not take the server down.
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(b"GET /metr")
            writer.close()
            assert (await client.get("/metrics")).status_code == 200
    finally:
        await server.close()
