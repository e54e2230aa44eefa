"""GPUIdleWhileQueueWaits: a workload holds idle GPUs while equal or higher-tier work waits.

The finding is made from Prometheus figures (domain.gpu_usage); the rule turns each into one alert."""

from __future__ import annotations

from tests.unit.domain.alerts.builders import T0, names, rule_input, settings, snapshot
from watchtower.domain.alerts.rules import gpu_idle
from watchtower.domain.gpu_usage import (
    IdleWhileWaiting,
    PrometheusHealth,
    WorkloadUsage,
    idle_alerts,
    unreachable_alert,
)
from watchtower.domain.workloads import WorkloadKey

NAME = "GPUIdleWhileQueueWaits"
IDLE = WorkloadKey("nlp", "PaddleJob", "batch-eval")


def idle(key=IDLE, *, gpus=4, waiting=(WorkloadKey("vision", "PaddleJob", "train"),)):
    usage = WorkloadUsage(
        key=key,
        team="nlp-team",
        priority_class="low-priority",
        pods=(f"{key.name}-worker-0",),
        gpus_allocated=float(gpus),
        gpus=gpus,
        slices=0,
        idle_gpus=gpus,
        idle_slices=0,
        idle_gpu_equivalent=float(gpus),
        util_avg=0.0,
    )
    return IdleWhileWaiting(idle=usage, idle_tier="low", waiting=tuple(waiting), highest_waiting_tier="high")


def fire(gpu_alerts, **changes):
    return gpu_idle.evaluate(rule_input(snapshot(), gpu_alerts=gpu_alerts, rule_settings=settings(**changes)))


def test_each_idle_workload_is_one_warning_with_the_findings_labels():
    found = idle_alerts([idle(), idle(WorkloadKey("nlp", "Job", "notebook"), gpus=1)])
    alerts = fire(found)
    assert names(alerts) == [(NAME, "warning"), (NAME, "warning")]
    assert [a.labels["workload"] for a in alerts] == ["batch-eval", "notebook"]
    assert dict(alerts[0].labels) == dict(found[0].labels)


def test_the_summary_says_what_is_idle_and_what_waits():
    (a,) = fire(idle_alerts([idle()]))
    assert a.annotations["summary"] == (
        "nlp/PaddleJob/batch-eval holds 4 GPU(s) idle while 1 workload(s) of tier high or equal wait"
    )
    assert a.annotations["waiting"] == "vision/PaddleJob/train"


def test_its_links_point_at_the_idle_workload():
    (a,) = fire(idle_alerts([idle()]), status_url="https://wt.example", dashboard_url="https://g.example/d/q")
    assert a.annotations["runbook_url"] == "docs/runbooks.md#gpuidlewhilequeuewaits"
    assert a.annotations["status_url"] == "https://wt.example/workloads/nlp/batch-eval?kind=PaddleJob"
    assert a.annotations["dashboard_url"] == "https://g.example/d/q?var-namespace=nlp&var-workload=batch-eval"


def test_no_finding_no_alert_and_a_prometheus_outage_is_not_an_idle_finding():
    assert fire([]) == []
    down = unreachable_alert(PrometheusHealth().failed(T0, "connection refused"))
    assert down is not None
    assert fire([down]) == []
