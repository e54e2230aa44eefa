"""promtool unit tests (`promtool test rules`) computed from the tier policy, so a changed threshold keeps
them right. Only fields that promtool 2.42 accepts: rule_files, evaluation_interval, tests with interval,
input_series, alert_rule_test (eval_time, alertname, exp_alerts) and promql_expr_test."""

from __future__ import annotations

import math

from watchtower.domain.alerts.rules.base import human
from watchtower.domain.promql.names import (
    CONFIG_VALID,
    FAIRNESS_ALLOCATED_GPUS,
    FAIRNESS_CAPACITY_CPU_CORES,
    FAIRNESS_CAPACITY_GPUS,
    FAIRNESS_CAPACITY_MEMORY_BYTES,
    FAIRNESS_EVALUATION,
    FAIRNESS_FREE_WHILE_WAITING_GPUS,
    FAIRNESS_IDLE_ALLOCATED_GPUS,
    FAIRNESS_TEAM_CPU_CORES,
    FAIRNESS_TEAM_GPUS,
    FAIRNESS_TEAM_IDLE_GPUS,
    FAIRNESS_TEAM_MEMORY_BYTES,
    FAIRNESS_TEAM_QUOTA_GPUS,
    FAIRNESS_UNAVAILABLE_GPUS,
    GPU_UTIL,
    JAIN_INDEX,
    LAST_EVALUATION,
    MALFORMED_OBJECTS_SKIPPED,
    MOST_PREEMPTIONS,
    NEVER_WORKLOADS,
    OLDEST_WAIT,
    PREEMPTION_OUTCOMES,
    TEAM_ATTAINMENT,
    TEAM_GPUS_ENTITLED,
    TEAM_GPUS_USED,
    TEAM_SATISFACTION,
    WAITING_GPUS,
    total,
)
from watchtower.domain.promql.syntax import duration
from watchtower.domain.tiers import Tier

from . import alerting, recording
from .params import RuleParams

STEP = 60  # input samples and rule evaluations, seconds
INSTANCE = "watchtower:8080"


def humanize_duration(v: float) -> str:
    """Return Prometheus' `humanizeDuration` of `v` seconds (whole seconds and up: "5m 0s", "1d 2h 0m 0s")."""
    # Not Watchtower's wording (domain.timefmt.format_duration): a copy of Prometheus' template function, so
    # that the expected annotations are what promtool renders.
    if v == 0 or abs(v) < 1:
        return f"{v:.4g}s"
    sign = "-" if v < 0 else ""
    n = int(abs(v))
    d, h, m, s = n // 86400, n // 3600 % 24, n // 60 % 60, n % 60
    if d:
        return f"{sign}{d}d {h}h {m}m {s}s"
    if h:
        return f"{sign}{h}h {m}m {s}s"
    if m:
        return f"{sign}{m}m {s}s"
    return f"{sign}{abs(v):.4g}s"


def _series(p: RuleParams, metric: str, extra: str = "") -> str:
    sel = f'{p.watchtower_selector},instance="{INSTANCE}"' + (f",{extra}" if extra else "")
    return f"{metric}{{{sel}}}"


def _minutes_up(seconds: float) -> int:
    return math.ceil(seconds / STEP) * STEP


def _wait_alert(p: RuleParams, t: Tier, severity: str, waited: float) -> dict[str, object]:
    """Return the expected alert of tier `t` at `severity` whose oldest wait was `waited` seconds."""
    name = alerting.QUEUE_WAIT_WARNING if severity == "warning" else alerting.QUEUE_WAIT_CRITICAL
    threshold = t.warn_after if severity == "warning" else t.critical_after
    key = "warn_after" if severity == "warning" else "critical_after"
    text = humanize_duration(waited)
    return {
        "exp_labels": {"severity": severity, "tier": t.name},
        "exp_annotations": {
            "summary": f"Work in the {t.name} tier has waited {text}, over its {severity} "
            f"threshold of {human(threshold)}",
            "description": f"The oldest waiting workload of tier {t.name} has waited {text} "
            f"({key} of the tier: {human(threshold)}). Watchtower's status page and its own "
            "alerts name the workloads and why they wait.",
            "runbook_url": p.runbook_url(name),
        },
    }


def _wait_fires(p: RuleParams, t: Tier, severity: str) -> int:
    """Return when the alert of `severity` fires for an oldest wait growing 60 s a minute from 0 at time 0."""
    name = alerting.QUEUE_WAIT_WARNING if severity == "warning" else alerting.QUEUE_WAIT_CRITICAL
    threshold = t.warn_after if severity == "warning" else t.critical_after
    mirrors = "WorkloadWaitWarning" if severity == "warning" else "WorkloadWaitCritical"
    return _minutes_up(threshold) + _minutes_up(p.for_of(name, mirrors))


def _wait_expectations(p: RuleParams, t: Tier, severity: str) -> list[dict[str, object]]:
    name = alerting.QUEUE_WAIT_WARNING if severity == "warning" else alerting.QUEUE_WAIT_CRITICAL
    fires = _wait_fires(p, t, severity)
    out: list[dict[str, object]] = []
    if fires - STEP > 0:
        out.append({"eval_time": duration(fires - STEP), "alertname": name, "exp_alerts": []})
    out.append(
        {
            "eval_time": duration(fires),
            "alertname": name,
            "exp_alerts": [_wait_alert(p, t, severity, fires)],
        }
    )
    return out


def tier_test(p: RuleParams, t: Tier) -> dict[str, object]:
    """Return one test: the oldest wait of tier `t` grows from 0; nothing before each threshold, the warning
    from its threshold on, the critical from its own."""
    last = _minutes_up(t.critical_after) + _minutes_up(
        p.for_of(alerting.QUEUE_WAIT_CRITICAL, "WorkloadWaitCritical")
    )
    n = last // STEP + 2
    return {
        "interval": duration(STEP),
        "input_series": [
            {
                "series": _series(p, OLDEST_WAIT, f'tier="{t.name}"'),
                "values": f"0+60x{n}",
            },
            {"series": _series(p, "up"), "values": f"1x{n}"},
        ],
        "alert_rule_test": _wait_expectations(p, t, "warning") + _wait_expectations(p, t, "critical"),
        "promql_expr_test": [
            {
                "expr": recording.OLDEST_WAIT_BY_TIER,
                "eval_time": duration(last),
                "exp_samples": [
                    {"labels": f'{recording.OLDEST_WAIT_BY_TIER}{{tier="{t.name}"}}', "value": float(last)}
                ],
            }
        ],
    }


def health_test(p: RuleParams) -> dict[str, object]:
    """Return one test: the scrape fails from minute 2 on; WatchtowerDown fires after its `for`, not before."""
    start = 2 * STEP
    fires = start + _minutes_up(p.down_for)
    n = fires // STEP + 2
    return {
        "interval": duration(STEP),
        "input_series": [{"series": _series(p, "up"), "values": f"1 1 0x{n}"}],
        "alert_rule_test": [
            {"eval_time": duration(fires - STEP), "alertname": alerting.DOWN, "exp_alerts": []},
            {
                "eval_time": duration(fires),
                "alertname": alerting.DOWN,
                "exp_alerts": [
                    {
                        "exp_labels": {
                            "severity": "critical",
                            **_selector_labels(p),
                            "instance": INSTANCE,
                        },
                        "exp_annotations": {
                            "summary": "Watchtower's /metrics cannot be scraped",
                            "description": f"Prometheus has not scraped Watchtower ({_selector_labels(p).get('job', '')} "
                            f"{INSTANCE}) for {human(p.down_for)}: queue alerts from these rules and from "
                            "Watchtower itself may be missing.",
                            "runbook_url": p.runbook_url(alerting.DOWN),
                        },
                    }
                ],
            },
        ],
    }


def stalled_test(p: RuleParams) -> dict[str, object]:
    """Return one test: Watchtower evaluates every minute, then its evaluation time stops moving; the stall
    alert is quiet while the window still holds a change, and fires once the window holds none."""
    window = p.stall_window
    stopped = (math.ceil(window / STEP) + 1) * STEP  # the last change; the window is full of history by then
    # The window holds no change once its start passes the sample before `stopped`. Prometheus 3's range
    # selectors are left-open, 2.x's closed: when that sample sits exactly on the start (it does here, the
    # test's steps being aligned), 3.x already fires and 2.x not yet. The cases sit one step either side of
    # that boundary, so they hold for both.
    boundary = stopped - STEP + window
    quiet = math.ceil(boundary / STEP) * STEP - STEP
    fires = math.floor(boundary / STEP) * STEP + STEP
    n = fires // STEP + 2
    moving = stopped // STEP
    return {
        "interval": duration(STEP),
        "input_series": [
            {
                "series": _series(p, LAST_EVALUATION),
                "values": f"0+{STEP}x{moving} {stopped}x{n - moving}",
            }
        ],
        "alert_rule_test": [
            {"eval_time": duration(quiet), "alertname": alerting.STALLED, "exp_alerts": []},
            {
                "eval_time": duration(fires),
                "alertname": alerting.STALLED,
                "exp_alerts": [
                    {
                        "exp_labels": {"severity": "critical", **_selector_labels(p), "instance": INSTANCE},
                        "exp_annotations": {
                            "summary": f"Watchtower has not evaluated the queue for {human(window)}",
                            "description": f"Watchtower ({INSTANCE}) is scraped but its last evaluation did not "
                            f"change for {human(window)} (it evaluates every {human(p.evaluate_every)}): its "
                            "queue figures and alerts are frozen.",
                            "runbook_url": p.runbook_url(alerting.STALLED),
                        },
                    }
                ],
            },
        ],
    }


def thrash_test(p: RuleParams, t: Tier) -> dict[str, object]:
    """Return one test: one workload of tier `t` is preempted once a minute; nothing while it has been
    preempted one time fewer than the thrash count, the alert from the count on (after its `for`)."""
    reached = p.thrash_count * STEP  # the series is 0, 1, 2, ... one step apart
    fires = reached + _minutes_up(p.for_of(alerting.PREEMPTION_THRASH, "WorkloadPreemptionThrash"))
    n = fires // STEP + 2
    annotations = _thrash_annotations(p, t, p.thrash_count)  # the series stays at the count once there
    return {
        "interval": duration(STEP),
        "input_series": [
            {
                "series": _series(p, MOST_PREEMPTIONS, f'tier="{t.name}"'),
                "values": f"0+1x{p.thrash_count} {p.thrash_count}x{n}",
            }
        ],
        "alert_rule_test": [
            # one step before: still pending (its `for`), or one preemption short of the count
            {"eval_time": duration(fires - STEP), "alertname": alerting.PREEMPTION_THRASH, "exp_alerts": []},
            {
                "eval_time": duration(fires),
                "alertname": alerting.PREEMPTION_THRASH,
                "exp_alerts": [
                    {"exp_labels": {"severity": "warning", "tier": t.name}, "exp_annotations": annotations}
                ],
            },
        ],
    }


def unhelpful_test(p: RuleParams) -> dict[str, object]:
    """Return one test: over an hour, the first tier's preemptions helped 1 in 4 (fires with 75 %), the last
    tier's 3 in 4 (silent), and a middle tier had one preemption, which did not help (too few to say)."""
    first, last = p.tiers.tiers[0].name, p.tiers.tiers[-1].name
    n = 80  # minutes of samples: the hour's window full, plus the rule's `for`

    def judged(tier: str, outcome: str, values: str) -> dict[str, str]:
        labels = f'preemptor_tier="{tier}",victim_tier="low",outcome="{outcome}"'
        return {"series": _series(p, total(PREEMPTION_OUTCOMES), labels), "values": values}

    series = [
        judged(first, "did_not_help", f"0+3x{n}"),
        judged(first, "helped", f"0+1x{n}"),
        judged(last, "did_not_help", f"0+1x{n}"),
        judged(last, "helped", f"0+3x{n}"),
    ]
    if len(p.tiers.tiers) > 2:
        series.append(judged(p.tiers.tiers[1].name, "did_not_help", f"0x10 1x{n - 10}"))
    at = 70 * STEP + _minutes_up(p.for_of(alerting.PREEMPTIONS_UNHELPFUL))
    return {
        "interval": duration(STEP),
        "input_series": series,
        "alert_rule_test": [
            {
                "eval_time": duration(at),
                "alertname": alerting.PREEMPTIONS_UNHELPFUL,
                "exp_alerts": [
                    {
                        "exp_labels": {"severity": "warning", "preemptor_tier": first},
                        "exp_annotations": {
                            "summary": f"Most preemptions by the {first} tier did not help (75% in 1h)",
                            "description": f"75% of the preemptions made for pods of tier {first} within 1h "
                            "did not help (alert above 50% of at least 4): the preemptor started on another "
                            "node than its victims', still waited, was deleted, or another pod took the room. "
                            "The victims' work was thrown away for nothing. /api/v1/preemptions and the "
                            "Preemption churn dashboard say which and why.",
                            "runbook_url": p.runbook_url(alerting.PREEMPTIONS_UNHELPFUL),
                        },
                    }
                ],
            },
        ],
    }


def _thrash_annotations(p: RuleParams, t: Tier, value: int) -> dict[str, str]:
    return {
        "summary": f"A workload of the {t.name} tier was preempted {value} times in {human(p.thrash_window)}",
        "description": f"One workload of tier {t.name} was preempted {value} times within "
        f"{human(p.thrash_window)} (alert at {p.thrash_count}): it restarts without making progress. "
        "Watchtower's WorkloadPreemptionThrash alert and the Preemption churn dashboard name it and its "
        "preemptors.",
        "runbook_url": p.runbook_url(alerting.PREEMPTION_THRASH),
    }


def never_test(p: RuleParams, t: Tier) -> dict[str, object]:
    """Return one test: a workload of tier `t` that can never start (a pod above every node) fires at once,
    with no `for`; a bigger node listed clears it at the next evaluation."""
    alert = {
        "exp_labels": {"severity": "warning", "tier": t.name, "reason": "node_resources"},
        "exp_annotations": {
            "summary": f"1 workload(s) of the {t.name} tier can never start as the cluster is configured "
            "(node_resources)",
            "description": f"1 waiting workload(s) of tier {t.name} ask more than the cluster can ever give "
            "(node_resources): waiting longer will not help. Watchtower's WorkloadCanNeverStart alert and "
            "its status page name each one with its numbers.",
            "runbook_url": p.runbook_url(alerting.NEVER_START),
        },
    }
    return {
        "interval": duration(STEP),
        "input_series": [
            {
                "series": _series(p, NEVER_WORKLOADS, f'tier="{t.name}",reason="node_resources"'),
                "values": "0 0 1 1 0 0",
            }
        ],
        "alert_rule_test": [
            {"eval_time": duration(STEP), "alertname": alerting.NEVER_START, "exp_alerts": []},
            {"eval_time": duration(2 * STEP), "alertname": alerting.NEVER_START, "exp_alerts": [alert]},
            {"eval_time": duration(4 * STEP), "alertname": alerting.NEVER_START, "exp_alerts": []},
        ],
    }


def wait_flap_test(p: RuleParams, t: Tier) -> dict[str, object]:
    """Return one test of `keep_firing_for` on the wait warning of tier `t`: the oldest wait grows past the
    threshold, drops to 0 for one evaluation, grows again. The alert stays firing through the dip (with the
    annotations of its last true evaluation) instead of resolving and going through its `for` again; a later
    drop that lasts resolves it once `keep_firing_for` has passed, not before."""
    fires = _wait_fires(p, t, "warning")
    dip = fires // STEP + 1  # the step whose value is under the threshold
    back = (dip + 1) * STEP  # the wait as it was, one step on
    kept = _minutes_up(p.keep_firing_for)  # the first evaluation this long after the drop resolves it
    drop = dip + 3  # from here on the queue is empty: the value stays 0
    values = f"0+60x{dip - 1} 0 {back}+60x1 0x{kept // STEP + 2}"
    name = alerting.QUEUE_WAIT_WARNING
    return {
        "interval": duration(STEP),
        "input_series": [
            {"series": _series(p, OLDEST_WAIT, f'tier="{t.name}"'), "values": values},
            {"series": _series(p, "up"), "values": f"1x{drop + kept // STEP + 2}"},
        ],
        "alert_rule_test": [
            {
                "eval_time": duration(fires),
                "alertname": name,
                "exp_alerts": [_wait_alert(p, t, "warning", fires)],
            },
            {
                "eval_time": duration(dip * STEP),
                "alertname": name,
                "exp_alerts": [_wait_alert(p, t, "warning", (dip - 1) * STEP)],
            },
            {
                "eval_time": duration(back),
                "alertname": name,
                "exp_alerts": [_wait_alert(p, t, "warning", back)],
            },
            {
                "eval_time": duration(drop * STEP + kept - STEP),
                "alertname": name,
                "exp_alerts": [_wait_alert(p, t, "warning", back + STEP)],  # its last true value
            },
            {"eval_time": duration(drop * STEP + kept), "alertname": name, "exp_alerts": []},
        ],
    }


def thrash_flap_test(p: RuleParams, t: Tier) -> dict[str, object]:
    """Return one test of `keep_firing_for` on the churn alert: a workload reaches the thrash count, one of
    its preemptions leaves the window for one evaluation (count − 1), the next preemption brings it back.
    The alert stays firing through the dip instead of resolving and re-firing."""
    c = p.thrash_count
    fires = c * STEP + _minutes_up(p.for_of(alerting.PREEMPTION_THRASH, "WorkloadPreemptionThrash"))
    dip = fires // STEP + 1
    values = [min(i, c) for i in range(dip)] + [c - 1] + [c] * 3
    exp = [
        {
            "exp_labels": {"severity": "warning", "tier": t.name},
            "exp_annotations": _thrash_annotations(p, t, c),
        }
    ]
    return {
        "interval": duration(STEP),
        "input_series": [
            {
                "series": _series(p, MOST_PREEMPTIONS, f'tier="{t.name}"'),
                "values": " ".join(str(v) for v in values),
            }
        ],
        "alert_rule_test": [
            {"eval_time": duration(at * STEP), "alertname": alerting.PREEMPTION_THRASH, "exp_alerts": exp}
            for at in (fires // STEP, dip, dip + 1)
        ],
    }


def info_inhibitor_test(p: RuleParams, t: Tier) -> dict[str, object]:
    """Return one test of the info severity: Watchtower skips unreadable objects from minute 2 on, so the
    info alert fires, and with it the InfoInhibitor that mutes it in Alertmanager; once the wait warning of
    tier `t` fires too, the InfoInhibitor resolves and the info alert goes out beside the warning."""
    info_fires = 2 * STEP + _minutes_up(p.for_of(alerting.OBJECTS_UNREADABLE))
    over = info_fires // STEP + 1  # the oldest wait is over the warning threshold from here on
    warns = over * STEP + _minutes_up(p.for_of(alerting.QUEUE_WAIT_WARNING, "WorkloadWaitWarning"))
    n = warns // STEP + 2
    info = {
        "exp_labels": {"severity": alerting.INFO, "kind": "Pod"},
        "exp_annotations": {
            "summary": "Watchtower could not read some Pod objects in the last "
            f"{human(p.rate_window)} and left them out of its picture",
            "description": "Objects of kind Pod that Watchtower could not decode are left out of its picture: "
            "workloads among them are not shown and raise no alert. The other objects are unaffected. An "
            "info alert: it is notified only beside a warning or critical Watchtower alert "
            f"({alerting.INFO_INHIBITOR} mutes it otherwise).",
            "runbook_url": p.runbook_url(alerting.OBJECTS_UNREADABLE),
        },
    }
    inhibitor = {
        "exp_labels": {"severity": "none"},
        "exp_annotations": {
            "summary": "Mutes Watchtower's info alerts while no warning or critical Watchtower alert fires",
            "description": "Not a problem in itself: the generated Alertmanager configuration routes this "
            "alert to a receiver without integrations and lets it inhibit the info alerts "
            f"({', '.join(alerting.DEGRADED_PICTURE)}), which are worth reading only beside a warning or "
            "critical alert.",
            "runbook_url": p.runbook_url(alerting.INFO_INHIBITOR),
        },
    }
    return {
        "interval": duration(STEP),
        "input_series": [
            {"series": _series(p, total(MALFORMED_OBJECTS_SKIPPED), 'kind="Pod"'), "values": f"0 0 1+1x{n}"},
            {
                "series": _series(p, OLDEST_WAIT, f'tier="{t.name}"'),
                "values": f"0x{over - 1} {t.warn_after:g}+60x{n - over}",
            },
            {"series": _series(p, "up"), "values": f"1x{n}"},
        ],
        "alert_rule_test": [
            {"eval_time": duration(STEP), "alertname": alerting.INFO_INHIBITOR, "exp_alerts": []},
            {
                "eval_time": duration(info_fires),
                "alertname": alerting.OBJECTS_UNREADABLE,
                "exp_alerts": [info],
            },
            {
                "eval_time": duration(info_fires),
                "alertname": alerting.INFO_INHIBITOR,
                "exp_alerts": [inhibitor],
            },
            {
                "eval_time": duration(warns - STEP),
                "alertname": alerting.INFO_INHIBITOR,
                "exp_alerts": [inhibitor],
            },
            {"eval_time": duration(warns), "alertname": alerting.INFO_INHIBITOR, "exp_alerts": []},
            {"eval_time": duration(warns), "alertname": alerting.OBJECTS_UNREADABLE, "exp_alerts": [info]},
        ],
    }


def fairness_test(p: RuleParams) -> dict[str, object]:
    """Return one test of Jain's index and attainment, with values worked out by hand.

    Teams a, b, c have demand, with satisfaction 1, 0.5 and 0.25 (a reported by two replicas: counted once);
    d has none (no series: left out). Σx = 1.75, Σx² = 1.3125, n = 3: J = 3.0625 / 3.9375 = 7/9. From
    minute 5 every x is 0: no index (0/0), not 0. Attainment: a uses 10 of 8 entitled (1.25), b 2 of 4
    (0.5); c is entitled to 0: no attainment."""
    sat, used, entitled = TEAM_SATISFACTION, TEAM_GPUS_USED, TEAM_GPUS_ENTITLED
    standby = p.watchtower_selector + ',instance="watchtower-standby:8080"'
    series = [
        {"series": _series(p, sat, 'team="a"'), "values": "1x4 0x4"},
        {"series": f'{sat}{{{standby},team="a"}}', "values": "1x4 0x4"},
        {"series": _series(p, sat, 'team="b"'), "values": "0.5x4 0x4"},
        {"series": _series(p, sat, 'team="c"'), "values": "0.25x4 0x4"},
        {"series": _series(p, used, 'team="a"'), "values": "10x8"},
        {"series": _series(p, used, 'team="b"'), "values": "2x8"},
        {"series": _series(p, used, 'team="c"'), "values": "1x8"},
        {"series": _series(p, entitled, 'team="a",source="quota"'), "values": "8x8"},
        {"series": _series(p, entitled, 'team="b",source="quota"'), "values": "4x8"},
        {"series": _series(p, entitled, 'team="c",source="none"'), "values": "0x8"},
    ]
    return {
        "interval": duration(STEP),
        "input_series": series,
        "promql_expr_test": [
            {
                "expr": JAIN_INDEX,
                "eval_time": duration(2 * STEP),
                "exp_samples": [{"labels": JAIN_INDEX, "value": 1.75**2 / (3 * 1.3125)}],
            },
            {"expr": JAIN_INDEX, "eval_time": duration(6 * STEP), "exp_samples": []},
            {
                "expr": TEAM_ATTAINMENT,
                "eval_time": duration(2 * STEP),
                "exp_samples": [
                    {"labels": f'{TEAM_ATTAINMENT}{{team="a"}}', "value": 1.25},
                    {"labels": f'{TEAM_ATTAINMENT}{{team="b"}}', "value": 0.5},
                ],
            },
        ],
    }


GIB = 2**30


def fairness_usage_test(p: RuleParams) -> dict[str, object]:
    """Return one test of the fairness report's per-step values, worked out by hand.

    Nodes n1 and n2 have 8 GPUs, 64 cores and 512 GiB each; n2 is cordoned (8 GPUs unavailable). Namespace
    ml (team label vision) runs pod p-0 on n1: 4 GPUs at 5 % (under θ: idle), 8 cores, 32 GiB, under a
    ResourceQuota of 8 GPUs; namespace lone (no team label: its own team) runs pod q-0 with 2 GPUs at 90 %.
    Vision waits for 6 more GPUs: free on schedulable nodes are n1's 8 − 6 = 2, so min(2, 6) = 2 GPUs free
    while work waited. At 10 minutes the evaluation-time series is 600 (s), labelled with the step."""
    ksm = p.queries.config.ksm_selector
    k = f"{ksm}," if ksm else ""
    series: list[dict[str, str]] = []
    for node, cordoned in (("n1", 0), ("n2", 1)):
        for resource, v in (("nvidia_com_gpu", 8), ("cpu", 64), ("memory", 512 * GIB)):
            sel = f'{k}node="{node}",resource="{resource}"'
            series.append({"series": f"kube_node_status_allocatable{{{sel}}}", "values": f"{v}x15"})
        series.append(
            {"series": f'kube_node_spec_unschedulable{{{k}node="{node}"}}', "values": f"{cordoned}x15"}
        )
        ready = f'{k}node="{node}",condition="Ready",status="true"'
        series.append({"series": f"kube_node_status_condition{{{ready}}}", "values": "1x15"})
    series.append(
        {"series": f'kube_namespace_labels{{{k}namespace="ml",label_team="vision"}}', "values": "1x15"}
    )
    series.append({"series": f'kube_namespace_labels{{{k}namespace="lone"}}', "values": "1x15"})
    quota = f'{k}namespace="ml",resource="requests.nvidia.com/gpu",type="hard"'
    series.append({"series": f"kube_resourcequota{{{quota}}}", "values": "8x15"})
    for ns, pod, gpus, cpu, mem, util in (("ml", "p-0", 4, 8, 32, 5), ("lone", "q-0", 2, 4, 16, 90)):
        base = f'{k}namespace="{ns}",pod="{pod}",uid="u-{pod}"'
        series.append({"series": f'kube_pod_status_phase{{{base},phase="Running"}}', "values": "1x15"})
        for resource, v in (("nvidia_com_gpu", gpus), ("cpu", cpu), ("memory", mem * GIB)):
            sel = f'{base},node="n1",container="main",resource="{resource}"'
            series.append({"series": f"kube_pod_container_resource_requests{{{sel}}}", "values": f"{v}x15"})
        dev = f'gpu="0",UUID="GPU-{pod}",Hostname="n1",namespace="{ns}",pod="{pod}",container="main"'
        series.append({"series": f"{GPU_UTIL}{{{dev}}}", "values": f"{util}x15"})
    series.append({"series": _series(p, WAITING_GPUS, 'team="vision",tier="low"'), "values": "6x15"})
    at = duration(10 * STEP)

    def one(name: str, value: float, labels: str = "") -> dict[str, object]:
        return {"expr": name, "eval_time": at, "exp_samples": [{"labels": f"{name}{labels}", "value": value}]}

    def teams(name: str, vision: float, lone: float | None) -> dict[str, object]:
        got = [{"labels": f'{name}{{team="vision"}}', "value": vision}]
        if lone is not None:
            got.append({"labels": f'{name}{{team="lone"}}', "value": lone})
        return {"expr": name, "eval_time": at, "exp_samples": got}

    return {
        "interval": duration(STEP),
        "input_series": series,
        "promql_expr_test": [
            teams(FAIRNESS_TEAM_GPUS, 4, 2),
            teams(FAIRNESS_TEAM_IDLE_GPUS, 1, None),  # one device of 4 GPUs' pod reported: counted once
            teams(FAIRNESS_TEAM_CPU_CORES, 8, 4),
            teams(FAIRNESS_TEAM_MEMORY_BYTES, 32 * GIB, 16 * GIB),
            teams(FAIRNESS_TEAM_QUOTA_GPUS, 8, None),
            one(FAIRNESS_CAPACITY_GPUS, 16),
            one(FAIRNESS_ALLOCATED_GPUS, 6),
            one(FAIRNESS_IDLE_ALLOCATED_GPUS, 1),
            one(FAIRNESS_FREE_WHILE_WAITING_GPUS, 2),
            one(FAIRNESS_UNAVAILABLE_GPUS, 8),
            one(FAIRNESS_CAPACITY_CPU_CORES, 128),
            one(FAIRNESS_CAPACITY_MEMORY_BYTES, 1024 * GIB),
            one(FAIRNESS_EVALUATION, 10 * STEP, f'{{step="{p.fairness_step:g}"}}'),
        ],
    }


def _selector_labels(p: RuleParams) -> dict[str, str]:
    """The equality matchers of the Watchtower selector, as labels a scraped series carries."""
    out = {}
    for part in p.watchtower_selector.split(","):
        name, sep, value = part.partition("=")
        if sep and not name.endswith(("!", "~")) and not value.startswith("~"):
            out[name.strip()] = value.strip().strip('"')
    return out


def config_test(p: RuleParams) -> dict[str, object]:
    """Return one test: the configuration is valid, then a bad file arrives; WatchtowerConfigInvalid fires at
    once (no `for`: the service already refused the file) and not before."""
    return {
        "interval": duration(STEP),
        "input_series": [{"series": _series(p, CONFIG_VALID), "values": "1 1 1 0 0 0"}],
        "alert_rule_test": [
            {"eval_time": duration(2 * STEP), "alertname": alerting.CONFIG_INVALID, "exp_alerts": []},
            {
                "eval_time": duration(3 * STEP),
                "alertname": alerting.CONFIG_INVALID,
                "exp_alerts": [
                    {
                        "exp_labels": {"severity": "warning", **_selector_labels(p), "instance": INSTANCE},
                        "exp_annotations": {
                            "summary": "Watchtower's configuration file changed to one it cannot use",
                            "description": f"Watchtower ({INSTANCE}) keeps running with its previous "
                            "configuration: the new file has problems, listed by YAML path in Watchtower's own "
                            "WatchtowerConfigInvalid alert and its log.",
                            "runbook_url": p.runbook_url(alerting.CONFIG_INVALID),
                        },
                    }
                ],
            },
        ],
    }


def unit_tests(p: RuleParams, rule_file: str) -> dict[str, object]:
    """Return the promtool test file for the rules at `rule_file` (relative to the test file)."""
    return {
        "rule_files": [rule_file],
        "evaluation_interval": duration(STEP),
        "tests": [tier_test(p, t) for t in p.tiers.tiers]
        + [
            health_test(p),
            stalled_test(p),
            thrash_test(p, p.tiers.tiers[-1]),
            unhelpful_test(p),
            never_test(p, p.tiers.tiers[0]),
            config_test(p),
            info_inhibitor_test(p, p.tiers.tiers[0]),
            fairness_test(p),
            fairness_usage_test(p),
        ]
        # keep_firing_for 0s (the default): a dip resolves the alert, as it does in the service.
        + (
            [wait_flap_test(p, p.tiers.tiers[0]), thrash_flap_test(p, p.tiers.tiers[-1])]
            if p.keep_firing_for
            else []
        ),
    }
