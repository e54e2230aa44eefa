"""Fleet mode's rewriting of PromQL text: the cluster label kept in every aggregation and join, a matcher
added to every selector, strings, ranges and label lists left alone."""

from __future__ import annotations

import pytest

from watchtower.domain.promql.fleet import keep_label, label_values_query, narrow

M = 'cluster=~"$cluster"'


@pytest.mark.parametrize(
    ("expr", "kept"),
    [
        ("sum (x)", "sum by (cluster) (x)"),
        ("max(x)", "max by (cluster) (x)"),
        ("sum by (team) (x)", "sum by (cluster, team) (x)"),
        ("sum by (cluster, team) (x)", "sum by (cluster, team) (x)"),
        ("sum(x) by (team)", "sum(x) by (cluster, team)"),
        ("a and on (namespace, pod) b", "a and on (cluster, namespace, pod) b"),
        (
            "count(a) unless on () count(b)",
            "count by (cluster) (a) unless on (cluster) count by (cluster) (b)",
        ),
        ("a * on (ns) group_left (team) b", "a * on (cluster, ns) group_left (team) b"),
        ("topk(3, x)", "topk by (cluster) (3, x)"),
        # functions, strings and ranges are not aggregations
        ("sum_over_time(x[5m])", "sum_over_time(x[5m])"),
        ('label_replace(x, "t", "sum (by)", "n", "(.*)")', 'label_replace(x, "t", "sum (by)", "n", "(.*)")'),
        ("a / ignoring (le) b", "a / ignoring (le) b"),
    ],
)
def test_keep_label(expr: str, kept: str) -> None:
    assert keep_label(expr, "cluster") == kept


def test_keep_nothing_is_the_same_text() -> None:
    expr = "sum (x) / on () count(y)"
    assert keep_label(expr) is expr


@pytest.mark.parametrize("expr", ["sum without (cluster) (x)", "a / ignoring (cluster) b"])
def test_dropping_the_kept_label_is_refused(expr: str) -> None:
    with pytest.raises(ValueError, match="drops a label"):
        keep_label(expr, "cluster")


@pytest.mark.parametrize(
    ("expr", "narrowed"),
    [
        ("up", f"up{{{M}}}"),
        ('up{job="w"}', f'up{{job="w",{M}}}'),
        ("rate(x_total[$__rate_interval])", f"rate(x_total{{{M}}}[$__rate_interval])"),
        ("sum by (team) (x) and on (team) y", f"sum by (team) (x{{{M}}}) and on (team) y{{{M}}}"),
        (
            'label_replace(vector(1), "tier", "low", "", "")',
            'label_replace(vector(1), "tier", "low", "", "")',
        ),
        ("x > 0.5", f"x{{{M}}} > 0.5"),
        ("x == bool 1", f"x{{{M}}} == bool 1"),
        ("rate(x[5m] offset 1h30m) + y", f"rate(x{{{M}}}[5m] offset 1h30m) + y{{{M}}}"),
    ],
)
def test_narrow(expr: str, narrowed: str) -> None:
    assert narrow(expr, M) == narrowed


def test_label_values_query() -> None:
    assert label_values_query("label_values(kube_pod_info, namespace)", M) == (
        f"label_values(kube_pod_info{{{M}}}, namespace)"
    )
    with pytest.raises(ValueError):
        label_values_query("query_result(up)", M)
