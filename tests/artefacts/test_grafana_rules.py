"""The Grafana-managed alert rules (alerts/generated/grafana-alert-rules.yaml) against their Prometheus twins.

Each Grafana rule's queries run on the REAL Prometheus, scraping an exporter on 127.0.0.1 that places
Watchtower's, DCGM's and kube-state-metrics' series just under, exactly at and just over every boundary (each
tier's warn_after and critical_after, the thrash count, the idle threshold, work waiting or not, a Watchtower
target down), and the twin's expression runs on the same Prometheus at the same moment: both must fire for the
same label sets. Grafana itself is not run here (no Grafana server can be installed on this machine): the
rule's math condition and no-data state are applied to the real query results by `_grafana_fires`, which
reads them from the provisioning file; it knows only the generated conditions' form `$A <op> $T|number`.
"""

from __future__ import annotations

import json
import operator
import re
import socket
import time
import urllib.parse
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from alerts import alerting, generate, grafana
from alerts.params import params_from
from tests.prometheus.prom_server import HTTPServer, PrometheusProcess, have_prometheus, metrics_route
from watchtower.config import Settings, settings_from_mapping
from watchtower.domain.promql.syntax import duration

ROOT = Path(__file__).parents[2]
FILE = ROOT / "alerts" / generate.GRAFANA_RULES
PROM_RULES = ROOT / "alerts" / generate.RULES
OPS = {">=": operator.ge, ">": operator.gt, "==": operator.eq, "<": operator.lt, "<=": operator.le}
CONDITION = re.compile(r"^\$A (>=|>|==|<|<=) (\$T|-?[0-9.]+)$")
Labels = frozenset[tuple[str, str]]


def _doc() -> dict:
    return yaml.safe_load(FILE.read_text())


def _grafana_rules() -> list[dict]:
    return [r for g in _doc()["groups"] for r in g["rules"]]


def _twins() -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for g in yaml.safe_load(PROM_RULES.read_text())["groups"]:
        for r in g["rules"]:
            if "alert" in r:
                out.setdefault(r["alert"], []).append(r)
    return out


# ---- the file as Grafana's provisioning reads it -------------------------------------------------------


def test_the_file_is_grafanas_alerting_provisioning_form() -> None:
    doc = _doc()
    assert doc["apiVersion"] == 1
    (group,) = doc["groups"]
    assert group["folder"] and group["name"] and group["interval"] == "1m" and group["orgId"] == 1
    for r in group["rules"]:
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", r["uid"]), r["uid"]
        assert r["noDataState"] in ("OK", "Alerting", "NoData") and r["execErrState"] in ("Error", "Alerting")
        refs = [q["refId"] for q in r["data"]]
        assert r["condition"] in refs and refs[0] == "A"
        for q in r["data"]:
            if q["datasourceUid"] == "__expr__":
                assert q["model"]["type"] == "math" and CONDITION.match(q["model"]["expression"])
            else:
                assert q["datasourceUid"] == grafana.DATASOURCE_UID and q["model"]["instant"] is True
        assert "$" not in json.dumps(r["labels"])  # Grafana expands environment variables in labels
        assert r["annotations"]["runbook_url"] == f"docs/runbooks.md#{r['title'].lower()}"
    assert len({r["uid"] for r in group["rules"]}) == len(group["rules"])


def test_each_grafana_rule_is_named_and_timed_as_its_prometheus_twins() -> None:
    twins = _twins()
    titles = [r["title"] for r in _grafana_rules()]
    assert sorted(titles) == sorted(
        [
            alerting.QUEUE_WAIT_WARNING,
            alerting.QUEUE_WAIT_CRITICAL,
            alerting.GPU_IDLE,
            alerting.PREEMPTION_THRASH,
            alerting.DOWN,
        ]
    )
    for r in _grafana_rules():
        fors = {t.get("for", "0s") for t in twins[r["title"]]}
        assert fors == {r["for"]}, r["title"]
        assert {t["labels"]["severity"] for t in twins[r["title"]]} == {r["labels"]["severity"]}


def test_the_datasource_uid_and_a_changed_policy_reach_the_file() -> None:
    from watchtower.config import settings_from_mapping

    settings = settings_from_mapping(
        {
            "tiers": [
                {"name": "gold", "min_priority": 10, "warn_after": "7m", "critical_after": "21m"},
                {"name": "tin", "min_priority": 0, "warn_after": "1h", "critical_after": "5h"},
            ],
            "alerting": {"rules": {"thrash_count": 5}},
        },
        env={},
    )
    text = generate.render_all(settings, grafana_datasource_uid="my-prom")[generate.GRAFANA_RULES]
    rules = {r["title"]: r for g in yaml.safe_load(text)["groups"] for r in g["rules"]}
    t = rules[alerting.QUEUE_WAIT_CRITICAL]["data"][1]["model"]["expr"]
    assert 'vector(1260), "tier", "gold"' in t and 'vector(18000), "tier", "tin"' in t
    assert rules[alerting.PREEMPTION_THRASH]["data"][-1]["model"]["expression"] == "$A >= 5"
    assert {q["datasourceUid"] for r in rules.values() for q in r["data"]} == {"my-prom", "__expr__"}


# ---- both on the real Prometheus, either side of every boundary ----------------------------------------


def _query(prom: PrometheusProcess, expr: str) -> list[dict]:
    url = f"{prom.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=30) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", (expr, body)
    return body["data"]["result"]


def _labels(metric: dict[str, str], extra: dict[str, str]) -> Labels:
    return frozenset({**{k: v for k, v in metric.items() if k != "__name__"}, **extra}.items())


def _grafana_fires(prom: PrometheusProcess, rule: dict) -> tuple[set[Labels], bool]:
    """Return (label sets of the alert instances Grafana would fire, whether it fires for no data)."""
    results = {
        q["refId"]: _query(prom, q["model"]["expr"]) for q in rule["data"] if q["datasourceUid"] != "__expr__"
    }
    cond = next(q for q in rule["data"] if q["refId"] == rule["condition"])["model"]["expression"]
    m = CONDITION.match(cond)
    assert m, cond
    op, rhs = OPS[m.group(1)], m.group(2)
    if not results["A"]:
        return set(), rule["noDataState"] == "Alerting"
    thresholds = {_labels(s["metric"], {}): float(s["value"][1]) for s in results.get("T", [])}
    fired = set()
    for s in results["A"]:
        key = _labels(s["metric"], {})
        # Grafana's math joins two sets of numbers on equal labels; a series without its pair yields nothing.
        bound = thresholds.get(key) if rhs == "$T" else float(rhs)
        if bound is not None and op(float(s["value"][1]), bound):
            fired.add(_labels(s["metric"], rule["labels"]))
    return fired, False


def _prometheus_fires(prom: PrometheusProcess, twins: list[dict]) -> set[Labels]:
    return {_labels(s["metric"], t["labels"]) for t in twins for s in _query(prom, t["expr"])}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: scrapes of it fail


class Placed:
    """The series the exporter serves, changed round by round."""

    def __init__(self) -> None:
        p = params_from(Settings())
        self.params = p
        self.round = 0
        self.waits = {t.name: 0.0 for t in p.tiers.tiers}
        self.most = {t.name: 0 for t in p.tiers.tiers}
        self.pending = 1

    def watchtower(self) -> str:
        lines = [f"boundary_round {self.round}"]
        lines += [f'watchtower_oldest_wait_seconds{{tier="{t}"}} {v:g}' for t, v in self.waits.items()]
        lines += [f'watchtower_workload_preemptions_max{{tier="{t}"}} {n}' for t, n in self.most.items()]
        lines += [
            f'watchtower_pending_workloads{{tier="{t}",namespace="queue",reason="gpu"}} {self.pending}'
            for t in self.waits
        ]
        return "\n".join(lines) + "\n"

    def dcgm(self) -> str:
        theta = self.params.idle_threshold
        lines = []
        for i, (ns, util) in enumerate((("under", theta - 0.5), ("at", theta), ("over", theta + 0.5))):
            lines.append(
                f'DCGM_FI_DEV_GPU_UTIL{{gpu="{i}",UUID="GPU-{i}",Hostname="node-{i}",pod="p-{ns}",'
                f'namespace="ns-{ns}",container="train"}} {util:g}'
            )
        return "\n".join(lines) + "\n"

    def ksm(self) -> str:
        lines = []
        for ns in ("under", "at", "over"):
            pod = f'namespace="ns-{ns}",pod="p-{ns}",uid="uid-{ns}"'
            lines.append(f'kube_pod_status_phase{{{pod},phase="Running"}} 1')
            lines.append(f'kube_pod_info{{{pod},priority_class="batch"}} 1')
            lines.append(f'kube_namespace_labels{{namespace="ns-{ns}",label_team="team-{ns}"}} 1')
        return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def placed(tmp_path_factory):
    if not have_prometheus():
        pytest.fail("prometheus/promtool not on PATH: run tests/setup/system-deps.sh")
    tmp = tmp_path_factory.mktemp("grafana-twins")
    state = Placed()
    exporter = HTTPServer(
        {
            "/watchtower": metrics_route(state.watchtower),
            "/dcgm": metrics_route(state.dcgm),
            "/ksm": metrics_route(state.ksm),
        }
    ).start()
    target = f"127.0.0.1:{exporter.port}"
    config = f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: watchtower
    metrics_path: /watchtower
    static_configs: [{{targets: ['{target}', '127.0.0.1:{_closed_port()}']}}]
  - job_name: dcgm-exporter
    metrics_path: /dcgm
    honor_labels: true
    static_configs: [{{targets: ['{target}']}}]
  - job_name: kube-state-metrics
    metrics_path: /ksm
    honor_labels: true
    static_configs: [{{targets: ['{target}']}}]
"""
    server = PrometheusProcess(config=config, data_dir=tmp / "data")
    server.start()
    try:
        yield server, state
    finally:
        server.stop()
        exporter.stop()


def _next_round(prom: PrometheusProcess, state: Placed) -> None:
    state.round += 1
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = _query(prom, "boundary_round")
        down = _query(prom, 'up{job="watchtower"} == 0')
        if got and float(got[0]["value"][1]) == state.round and down:
            return
        time.sleep(0.3)
    raise AssertionError(f"Prometheus did not scrape round {state.round}")


def _rounds(state: Placed):
    """Yield (description, what each rule must do) after placing each round's values."""
    p = state.params
    for attr in ("warn_after", "critical_after"):
        for offset in (-1, 0, 1):
            for t in p.tiers.tiers:
                state.waits[t.name] = getattr(t, attr) + offset
            for t in state.most:
                state.most[t] = p.thrash_count + offset
            state.pending = offset + 1  # 0: nothing waits, so idle GPUs do not alert
            yield f"{attr}{offset:+d}", offset


def test_each_grafana_rule_fires_as_its_twin_on_either_side_of_every_boundary(placed) -> None:
    prom, state = placed
    twins = _twins()
    rules = _grafana_rules()
    seen: dict[str, set[bool]] = {r["title"]: set() for r in rules}
    for name, offset in _rounds(state):
        _next_round(prom, state)
        for r in rules:
            fired, no_data = _grafana_fires(prom, r)
            assert not no_data, (name, r["title"])
            expected = _prometheus_fires(prom, twins[r["title"]])
            assert fired == expected, f"{name}: {r['title']}: Grafana {fired} but Prometheus {expected}"
            seen[r["title"]].add(bool(fired))
        waits = {r["title"]: _grafana_fires(prom, r)[0] for r in rules}
        if name.startswith("warn_after"):
            # just under the warning threshold nothing warns; at and over it every tier does
            assert len(waits[alerting.QUEUE_WAIT_WARNING]) == (0 if offset < 0 else len(state.waits))
        assert len(waits[alerting.PREEMPTION_THRASH]) == (0 if offset < 0 else len(state.most))
        idle = {dict(s)["namespace"] for s in waits[alerting.GPU_IDLE]}
        assert idle == (set() if offset < 0 else {"ns-under"}), name  # at θ is not under θ
        down = [dict(s) for s in waits[alerting.DOWN]]
        assert len(down) == 1 and down[0]["instance"] != f"127.0.0.1:{prom.port}"
    # every rule was seen both firing and silent, so the comparison was not of empty sets only
    assert all(v == {True, False} for t, v in seen.items() if t != alerting.DOWN), seen


def test_with_no_watchtower_target_both_say_watchtower_is_down(placed) -> None:
    prom, _ = placed
    p = replace(params_from(Settings()), watchtower_selector='job="no-such-job"')
    (down,) = [r for r in grafana.provisioning(p)["groups"][0]["rules"] if r["title"] == alerting.DOWN]
    fired, no_data = _grafana_fires(prom, down)
    assert fired == set() and no_data  # Grafana: no data → Alerting
    assert _query(prom, alerting.down_expr(p))  # Prometheus: absent(...) fires
    assert down["for"] == duration(p.down_for)


def test_the_grafana_wait_and_churn_rules_keep_firing_as_the_prometheus_rules_and_the_others_do_not() -> None:
    settings = settings_from_mapping({"alerting": {"rules": {"keep_firing_for": "5m"}}}, env={})
    doc = yaml.safe_load(generate.render_all(settings)[generate.GRAFANA_RULES])
    rules = [r for g in doc["groups"] for r in g["rules"]]
    keeping = {r["title"] for r in rules if r.get("keepFiringFor") == "5m"}
    assert keeping == {r["title"] for r in rules} & set(alerting.KEEP_FIRING)
    assert alerting.QUEUE_WAIT_WARNING in keeping and alerting.DOWN not in keeping
