"""promtool tests of the fleet-mode rules: every single-cluster test run on two clusters at once, and one
test where only one cluster's work waits.

Every single-cluster test is run with its input series given twice, labelled cluster a and cluster b: each
recorded sample and each alert is then expected once per cluster, with the cluster's label and the
single-cluster value. A rule that mixed the clusters fails it: a sum would double, and a max or a count that
dropped the label would give one series without it where promtool expects two with it. The second test gives
the clusters different figures (a's oldest wait grows, b has nothing waiting), so the wait alerts fire for a
only and the recorded series of a and b differ.
"""

from __future__ import annotations

import copy
from typing import Any

from watchtower.domain.promql.names import FAIRNESS_EVALUATION, OLDEST_WAIT, PENDING_WORKLOADS
from watchtower.domain.promql.syntax import duration, quoted

from . import recording
from .params import RuleParams
from .unit_tests import STEP, _series, tier_test

CLUSTERS = ("a", "b")
# Recorded from `vector(time())`: the rules' evaluation time, one series whatever the clusters.
_UNLABELLED = (FAIRNESS_EVALUATION,)


def with_label(series: str, label: str, value: str) -> str:
    """Return a series text (`name{...}` or `name`) with `label="value"` added."""
    matcher = f"{label}={quoted(value)}"
    if series.endswith("}"):
        head, _, inner = series[:-1].partition("{")
        return f"{head}{{{inner},{matcher}}}" if inner.strip() else f"{head}{{{matcher}}}"
    return f"{series}{{{matcher}}}"


def _expected(alert: dict[str, Any], label: str, cluster: str) -> dict[str, Any]:
    """Return an expected alert of one cluster: its label, and its summary beginning with its name
    (RuleParams.summary)."""
    out = {**alert, "exp_labels": {**alert["exp_labels"], label: cluster}}
    notes = alert.get("exp_annotations", {})
    if "summary" in notes:
        out["exp_annotations"] = {**notes, "summary": f"[{cluster}] {notes['summary']}"}
    return out


def _unlabelled(sample_labels: str) -> bool:
    return sample_labels.split("{")[0] in _UNLABELLED


def on_two_clusters(test: dict[str, Any], label: str) -> dict[str, Any]:
    """Return `test` with its input series in clusters a and b and every expectation once per cluster."""
    out = copy.deepcopy(test)
    out["input_series"] = [
        {**s, "series": with_label(s["series"], label, c)} for c in CLUSTERS for s in test["input_series"]
    ]
    for case in out.get("alert_rule_test", []):
        case["exp_alerts"] = [_expected(a, label, c) for c in CLUSTERS for a in case["exp_alerts"]]
    for case in out.get("promql_expr_test", []):
        samples = []
        for s in case["exp_samples"]:
            if _unlabelled(s["labels"]):
                samples.append(s)
            else:
                samples += [{**s, "labels": with_label(s["labels"], label, c)} for c in CLUSTERS]
        case["exp_samples"] = samples
    return out


def only_a_waits(p: RuleParams, label: str) -> dict[str, Any]:
    """Return one test: cluster a's oldest wait in the first tier grows and 3 of its workloads wait; cluster
    b reports the same series with nothing waiting. The wait alerts fire for a only; the recorded oldest
    wait and waiting count are a's and b's own."""
    t = p.tiers.tiers[0]
    base: dict[str, Any] = tier_test(p, t)
    a, b = (f"{label}={quoted(c)}" for c in CLUSTERS)
    n = int(base["input_series"][0]["values"].rsplit("x", 1)[1])
    pending = _series(p, PENDING_WORKLOADS, f'namespace="ml",tier="{t.name}"')
    series = [
        {
            "series": with_label(_series(p, OLDEST_WAIT, f'tier="{t.name}"'), label, "a"),
            "values": f"0+60x{n}",
        },
        {"series": with_label(_series(p, OLDEST_WAIT, f'tier="{t.name}"'), label, "b"), "values": f"0x{n}"},
        {"series": with_label(pending, label, "a"), "values": f"3x{n}"},
        {"series": with_label(pending, label, "b"), "values": f"0x{n}"},
        *({"series": with_label(_series(p, "up"), label, c), "values": f"1x{n}"} for c in CLUSTERS),
    ]
    alerts = copy.deepcopy(base["alert_rule_test"])
    for case in alerts:
        case["exp_alerts"] = [_expected(x, label, "a") for x in case["exp_alerts"]]
    last = base["promql_expr_test"][0]["eval_time"]
    last_s = float(base["promql_expr_test"][0]["exp_samples"][0]["value"])
    tier = f'tier="{t.name}"'
    return {
        "interval": duration(STEP),
        "input_series": series,
        "alert_rule_test": alerts,
        "promql_expr_test": [
            {
                "expr": recording.OLDEST_WAIT_BY_TIER,
                "eval_time": last,
                "exp_samples": [
                    {"labels": f"{recording.OLDEST_WAIT_BY_TIER}{{{a},{tier}}}", "value": last_s},
                    {"labels": f"{recording.OLDEST_WAIT_BY_TIER}{{{b},{tier}}}", "value": 0.0},
                ],
            },
            {
                "expr": recording.PENDING_BY_TIER,
                "eval_time": last,
                "exp_samples": [
                    {"labels": f"{recording.PENDING_BY_TIER}{{{a},{tier}}}", "value": 3.0},
                    {"labels": f"{recording.PENDING_BY_TIER}{{{b},{tier}}}", "value": 0.0},
                ],
            },
        ],
    }


def fleet_unit_tests(single: dict[str, Any], p: RuleParams) -> dict[str, Any]:
    """Return the fleet-mode test file from the single-cluster one (`unit_tests.unit_tests`)."""
    (label,) = p.keep
    return {
        **single,
        "tests": [only_a_waits(p, label), *(on_two_clusters(t, label) for t in single["tests"])],
    }
