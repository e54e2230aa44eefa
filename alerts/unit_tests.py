"""promtool unit tests (`promtool test rules`) computed from the tier policy, so a changed threshold keeps
them right. Only fields that promtool 2.42 accepts: rule_files, evaluation_interval, tests with interval,
input_series, alert_rule_test (eval_time, alertname, exp_alerts) and promql_expr_test."""

from __future__ import annotations

import math

from watchtower.domain.alerts.rules.base import human
from watchtower.domain.promql import (
    CONFIG_VALID,
    JAIN_INDEX,
    LAST_EVALUATION,
    MOST_PREEMPTIONS,
    OLDEST_WAIT,
    TEAM_ATTAINMENT,
    TEAM_GPUS_ENTITLED,
    TEAM_GPUS_USED,
    TEAM_SATISFACTION,
    duration,
)
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


def _wait_expectations(p: RuleParams, t: Tier, severity: str) -> list[dict[str, object]]:
    name = alerting.QUEUE_WAIT_WARNING if severity == "warning" else alerting.QUEUE_WAIT_CRITICAL
    threshold = t.warn_after if severity == "warning" else t.critical_after
    key = "warn_after" if severity == "warning" else "critical_after"
    mirrors = "WorkloadWaitWarning" if severity == "warning" else "WorkloadWaitCritical"
    crossed = _minutes_up(threshold)  # the oldest wait grows 60 s a minute from 0 at time 0
    fires = crossed + _minutes_up(p.for_of(name, mirrors))
    waited = humanize_duration(fires)
    out: list[dict[str, object]] = []
    if fires - STEP > 0:
        out.append({"eval_time": duration(fires - STEP), "alertname": name, "exp_alerts": []})
    out.append(
        {
            "eval_time": duration(fires),
            "alertname": name,
            "exp_alerts": [
                {
                    "exp_labels": {"severity": severity, "tier": t.name},
                    "exp_annotations": {
                        "summary": f"Work in the {t.name} tier has waited {waited}, over its {severity} "
                        f"threshold of {human(threshold)}",
                        "description": f"The oldest waiting workload of tier {t.name} has waited {waited} "
                        f"({key} of the tier: {human(threshold)}). Watchtower's status page and its own "
                        "alerts name the workloads and why they wait.",
                        "runbook_url": p.runbook_url(name),
                    },
                }
            ],
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
    value = p.thrash_count  # the series stays at the count once there
    annotations = {
        "summary": f"A workload of the {t.name} tier was preempted {value} times in {human(p.thrash_window)}",
        "description": f"One workload of tier {t.name} was preempted {value} times within "
        f"{human(p.thrash_window)} (alert at {p.thrash_count}): it restarts without making progress. "
        "Watchtower's WorkloadPreemptionThrash alert and the Preemption churn dashboard name it and its "
        "preemptors.",
        "runbook_url": p.runbook_url(alerting.PREEMPTION_THRASH),
    }
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
            config_test(p),
            fairness_test(p),
        ],
    }
