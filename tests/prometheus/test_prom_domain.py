"""The pure parts: PromQL building, the idle view, the tier verdict, stale holding, the health self-alert."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.prometheus.prom_snapshots import snapshot_holding_and_waiting, snapshot_waiting
from watchtower.config.model import Settings
from watchtower.domain.gpu_usage import (
    IDLE_ALERT,
    UNREACHABLE_ALERT,
    IdlePolicy,
    PodAllocation,
    PrometheusHealth,
    Sample,
    allocations_from_samples,
    devices_from_samples,
    idle_alerts,
    idle_while_waiting,
    recheck_while_stale,
    unreachable_alert,
    usage_view,
)
from watchtower.domain.promql.exporters import ExporterQueries, LabelMapping, QueryConfig
from watchtower.domain.promql.syntax import check_window, duration
from watchtower.domain.workloads import WorkloadKey

NOW = 1_800_000_000.0
TIERS = Settings().tier_policy()


def _dev(pod: str, util: float, *, gpu: str = "0", ns: str = "ml", seen: float = NOW - 3600, **extra: str):
    labels = {"Hostname": "n1", "UUID": f"GPU-{pod}-{gpu}", "gpu": gpu, "namespace": ns, "pod": pod, **extra}
    return Sample(labels, util), Sample(labels, util), Sample(labels, seen)


def _view(devs, allocs, policy=IdlePolicy()):
    umax, uavg, seen = zip(*devs, strict=True) if devs else ((), (), ())
    devices, skipped = devices_from_samples(umax, uavg, seen)
    return usage_view(devices, allocs, policy=policy, now=NOW, skipped=skipped)


def test_durations_are_written_the_way_prometheus_reads_them() -> None:
    assert [duration(s) for s in (1800, 604800, 1.5, 90, 86400)] == ["30m", "1w", "1500ms", "90s", "1d"]
    with pytest.raises(ValueError):
        duration(0)


def test_a_window_shorter_than_four_scrapes_is_refused() -> None:
    check_window(120, 30)
    with pytest.raises(ValueError, match="4 × the scrape interval"):
        check_window(90, 30)


def test_label_mapping_writes_every_spelling_into_the_canonical_label() -> None:
    expr = ExporterQueries().device_utilisation()
    for alt in ("pod_name", "exported_pod", "pod_namespace", "exported_namespace", "hostname", "uuid"):
        assert f'"{alt}", "(.+)"' in expr
    with pytest.raises(ValueError, match="label mapping"):
        LabelMapping(pod=("pod", "bad-name"))
    with pytest.raises(ValueError, match="without them"):
        QueryConfig(ksm_selector='{job="ksm"}')


def test_only_running_pods_with_gpus_count_and_unmonitored_ones_are_listed() -> None:
    allocs = allocations_from_samples(
        [Sample({"namespace": "ml", "pod": "a"}, 1), Sample({"namespace": "ml", "pod": "quiet"}, 2)],
        [Sample({"namespace": "ml", "pod": "a", "owner_kind": "Job", "owner_name": "j"}, 1)],
    )
    view = _view([_dev("a", 1.0), _dev("exporter-pod", 0.0)], allocs)
    assert [str(w.key) for w in view.workloads] == ["ml/Job/j", "ml/Pod/quiet"]
    assert view.unmonitored_pods == (("ml", "quiet"),)
    assert view.idle_gpus == 1


def test_a_device_without_host_or_with_nan_is_skipped_and_counted() -> None:
    bad = Sample({"namespace": "ml", "pod": "a", "gpu": "0"}, 1.0)  # no Hostname
    nan = Sample({"Hostname": "n", "gpu": "1", "namespace": "ml", "pod": "a"}, float("nan"))
    devices, skipped = devices_from_samples([bad, nan], [], [])
    assert devices == [] and skipped == 2


def test_a_device_seen_for_less_than_the_window_is_not_idle() -> None:
    allocs = [PodAllocation("ml", "new", 1)]
    view = _view([_dev("new", 0.0, seen=NOW - 600)], allocs)
    assert view.idle() == []


def test_mig_slices_count_as_slices_with_their_share_of_a_gpu() -> None:
    allocs = [PodAllocation("ml", "m", 2)]
    devs = [
        _dev("m", 1.0, GPU_I_PROFILE="1g.10gb", GPU_I_ID="7"),
        _dev("m", 1.0, GPU_I_PROFILE="3g.40gb", GPU_I_ID="2"),
    ]
    (w,) = _view(devs, allocs).workloads
    assert (w.gpus, w.slices, w.idle_gpus, w.idle_slices) == (0, 2, 0, 2)
    assert w.idle_gpu_equivalent == pytest.approx(4 / 7)


@pytest.mark.parametrize(
    ("idle_class", "waiting_priority", "alerts"),
    [
        ("batch", 900_000, 1),  # low tier idles while high waits
        ("batch", 100_000, 1),  # equal tier waits
        ("urgent-debug", 900_000, 0),  # critical idles, only high waits: not its business
        ("unknown-class", 100_000, 1),  # an unknown class is taken as the lowest tier
    ],
)
def test_idle_gpus_alert_only_when_work_of_equal_or_higher_tier_waits(
    idle_class, waiting_priority, alerts
) -> None:
    allocs = [PodAllocation("ml", "i", 1, "PaddleJob", "idle", idle_class)]
    view = _view([_dev("i", 0.0)], allocs)
    snap = snapshot_waiting(NOW, namespace="other", name="w", priority=waiting_priority, waited=60)
    verdicts = idle_while_waiting(
        view, snap, TIERS, class_priority={"batch": 100_000, "urgent-debug": 1_000_000}
    )
    got = idle_alerts(verdicts)
    assert len(got) == alerts
    if got:
        assert got[0].name == IDLE_ALERT and got[0].labels["workload"] == "idle"


def test_nothing_waiting_gives_a_report_but_no_verdict() -> None:
    view = _view([_dev("i", 0.0)], [PodAllocation("ml", "i", 1)])
    snap = snapshot_waiting(NOW, namespace="o", name="w", priority=1, waited=60)
    from dataclasses import replace

    assert idle_while_waiting(view, replace(snap, workloads=()), TIERS) == []
    assert view.idle_gpus == 1


def _idle_job_verdicts(snap):
    view = _view([_dev("idle-worker-0", 0.0)], [PodAllocation("ml", "idle-worker-0", 2, "PaddleJob", "idle")])
    return idle_while_waiting(view, snap, TIERS)


def test_stale_figures_hold_the_idle_alert_while_kubernetes_still_bears_it_out() -> None:
    before = snapshot_holding_and_waiting(
        NOW, holders=[("ml", "idle", 2, 100_000)], waiting=[("o", "urgent", 1_000_000)]
    )
    verdicts = _idle_job_verdicts(before)
    firing = idle_alerts(verdicts)
    assert [a.labels["workload"] for a in firing] == ["idle"]
    # an hour later Prometheus is down: same holder, same waiter → the same alert (same identity)
    later = snapshot_holding_and_waiting(
        NOW + 3600, holders=[("ml", "idle", 2, 100_000)], waiting=[("o", "urgent", 1_000_000)]
    )
    held = idle_alerts(recheck_while_stale(verdicts, later, TIERS))
    assert [a.identity for a in held] == [a.identity for a in firing]
    assert held[0].annotations["waiting"] == "o/PaddleJob/urgent"


def test_stale_idle_alert_resolves_when_the_idle_workload_is_gone_from_the_cluster() -> None:
    before = snapshot_holding_and_waiting(
        NOW, holders=[("ml", "idle", 2, 100_000)], waiting=[("o", "urgent", 1_000_000)]
    )
    verdicts = _idle_job_verdicts(before)
    assert verdicts
    gone = snapshot_holding_and_waiting(NOW + 60, holders=[], waiting=[("o", "urgent", 1_000_000)])
    assert recheck_while_stale(verdicts, gone, TIERS) == []


def test_without_the_holders_statuses_a_stale_idle_alert_is_only_rechecked_against_the_queue() -> None:
    before = snapshot_holding_and_waiting(
        NOW, holders=[("ml", "idle", 2, 100_000)], waiting=[("o", "urgent", 1_000_000)]
    )
    verdicts = _idle_job_verdicts(before)
    # a waiting-only tick: the holder is absent because running workloads are not evaluated, not gone
    waiting_only = snapshot_waiting(NOW + 60, namespace="o", name="urgent", priority=1_000_000, waited=660)
    assert recheck_while_stale(verdicts, waiting_only, TIERS, holders_included=False) == verdicts
    assert recheck_while_stale(verdicts, waiting_only, TIERS) == []
    drained = replace(waiting_only, workloads=())
    assert recheck_while_stale(verdicts, drained, TIERS, holders_included=False) == []


def test_stale_idle_alert_resolves_when_no_equal_or_higher_tier_work_waits_any_more() -> None:
    before = snapshot_holding_and_waiting(
        NOW, holders=[("ml", "idle", 2, 500_000)], waiting=[("o", "urgent", 1_000_000)]
    )
    verdicts = _idle_job_verdicts(before)
    assert [v.idle_tier for v in verdicts] == ["medium"]
    drained = snapshot_holding_and_waiting(NOW + 60, holders=[("ml", "idle", 2, 500_000)], waiting=[])
    assert recheck_while_stale(verdicts, drained, TIERS) == []
    # only lower-tier work waits now: a medium-tier holder does not block it in this alert's sense
    lower = snapshot_holding_and_waiting(
        NOW + 60, holders=[("ml", "idle", 2, 500_000)], waiting=[("o", "batchy", 100_000)]
    )
    assert recheck_while_stale(verdicts, lower, TIERS) == []


def test_stale_idle_alert_names_the_workloads_waiting_now_not_those_of_the_last_reading() -> None:
    before = snapshot_holding_and_waiting(
        NOW, holders=[("ml", "idle", 2, 100_000)], waiting=[("o", "first", 1_000_000)]
    )
    verdicts = _idle_job_verdicts(before)
    now = snapshot_holding_and_waiting(
        NOW + 60, holders=[("ml", "idle", 2, 100_000)], waiting=[("o", "second", 900_000)]
    )
    (v,) = recheck_while_stale(verdicts, now, TIERS)
    assert v.waiting == (WorkloadKey("o", "PaddleJob", "second"),) and v.highest_waiting_tier == "high"


def test_unreachable_alert_after_the_configured_failures_and_gone_on_success() -> None:
    h = PrometheusHealth().failed(NOW, "refused")
    assert unreachable_alert(h, failures=2) is None
    h = h.failed(NOW + 60, "refused")
    a = unreachable_alert(h, failures=2)
    assert a is not None and a.name == UNREACHABLE_ALERT and a.annotations["error"] == "refused"
    assert unreachable_alert(h.succeeded(NOW + 120), failures=2) is None


def test_gpu_findings_become_alert_candidates_through_the_rule_framework() -> None:
    from watchtower.domain.alerts.rules import RuleInput, evaluate_rules

    view = _view([_dev("i", 0.0)], [PodAllocation("ml", "i", 1, "PaddleJob", "idle", "batch")])
    snap = snapshot_waiting(NOW, namespace="o", name="w", priority=900_000, waited=60)
    found = idle_alerts(idle_while_waiting(view, snap, TIERS))
    down = unreachable_alert(PrometheusHealth().failed(NOW, "refused"))
    assert down is not None
    inp = RuleInput(
        snapshot=snap, now=NOW, tiers=TIERS, settings=Settings().rule_settings(), gpu_alerts=[*found, down]
    )
    got = evaluate_rules(inp)
    by_name = {c.alertname: c for c in got}
    assert by_name[IDLE_ALERT].labels["workload"] == "idle"
    assert by_name[IDLE_ALERT].annotations["runbook_url"].endswith("#gpuidlewhilequeuewaits")
    assert by_name[UNREACHABLE_ALERT].labels["team"] == "watchtower"


def test_ksm_series_are_read_across_one_missed_scrape_and_teams_never_drop_a_namespace() -> None:
    q = ExporterQueries(QueryConfig(ksm_bridge=60))
    assert (
        'last_over_time(kube_pod_status_phase{job="kube-state-metrics",phase="Running"}[1m])'
        in q.pod_running()
    )
    assert "last_over_time(kube_pod_container_resource_requests{" in q.pod_gpus_allocated()
    plain = ExporterQueries(QueryConfig(ksm_bridge=0)).pod_running()
    assert "last_over_time" not in plain and 'kube_pod_status_phase{job="kube-state-metrics"' in plain
    assert "unless on (namespace)" in q.team_gpus_allocated()
    with pytest.raises(ValueError, match="ksm_bridge"):
        QueryConfig(ksm_bridge=-1)


def test_the_configured_scrape_interval_sets_the_ksm_bridge() -> None:
    from watchtower.config.prometheus import PrometheusConfig

    cfg = PrometheusConfig(url="http://prometheus:9090", scrape_interval=15, idle_window=1800)
    assert cfg.query_config().ksm_bridge == 30


def test_a_gpu_handed_to_a_new_pod_is_not_idle_on_the_old_pods_coverage() -> None:
    """One GPU, two series: the old pod held it all window and has gone; the new one got it a minute ago
    and reads 0 % while it pulls its image. The newcomer has not been idle for the window."""
    gpu = {"Hostname": "n1", "UUID": "GPU-shared-0", "gpu": "0", "namespace": "ml"}
    old, new = {**gpu, "pod": "train-old"}, {**gpu, "pod": "debug-new"}
    umax = [Sample(old, 90.0), Sample(new, 0.0)]
    uavg = [Sample(old, 88.0), Sample(new, 0.0)]
    # The old series first seen at the window's start, the new one a minute ago; either order of results.
    for seen in (
        [Sample(new, NOW - 60), Sample(old, NOW - 1800)],
        [Sample(old, NOW - 1800), Sample(new, NOW - 60)],
    ):
        devices, _ = devices_from_samples(umax, uavg, seen)
        (d,) = [d for d in devices if d.pod == "debug-new"]
        assert d.first_seen == NOW - 60 and d.util_avg == 0.0
        view = usage_view(devices, [PodAllocation("ml", "debug-new", 1)], policy=IdlePolicy(), now=NOW)
        assert view.idle() == []


def test_a_gpu_whose_pod_started_after_the_windows_last_step_is_not_idle() -> None:
    """The first-seen figure is read at the query step: a pod given a GPU since the last step (0 % while it
    pulls its image) has no first-seen sample at all. That is "seen just now", not "seen all window"."""
    new = {"Hostname": "n1", "UUID": "GPU-new-0", "gpu": "0", "namespace": "ml", "pod": "worker-1"}
    devices, _ = devices_from_samples([Sample(new, 0.0)], [Sample(new, 0.0)], [])
    view = usage_view(devices, [PodAllocation("ml", "worker-1", 1)], policy=IdlePolicy(), now=NOW)
    assert view.idle() == []
    # Without a first-seen query at all, the window's figures are all there is to go by.
    devices, _ = devices_from_samples([Sample(new, 0.0)], [Sample(new, 0.0)])
    view = usage_view(devices, [PodAllocation("ml", "worker-1", 1)], policy=IdlePolicy(), now=NOW)
    assert [w.idle_gpus for w in view.idle()] == [1]
