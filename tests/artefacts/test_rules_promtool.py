"""The generated Prometheus rules with the real promtool, Debian's (2.42) and 3.x built from the Prometheus Go
module (tests/setup/build-promtool3.sh), since users run both: they load, their generated unit tests pass
under each, and the unit tests follow a changed tier policy."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from alerts import alerting, generate
from watchtower.config import Settings, settings_from_mapping

ROOT = Path(__file__).parents[2]
RULES = ROOT / "alerts" / generate.RULES
TESTS = ROOT / "alerts" / generate.TESTS

CUSTOM = {
    "tiers": [
        {
            "name": "urgent",
            "min_priority": 1000,
            "classes": ["pager"],
            "warn_after": "90s",
            "critical_after": "4m",
        },
        {"name": "bulk", "min_priority": 0, "warn_after": "45m", "critical_after": "3h"},
    ],
    "alerting": {"rules": {"pending_for_by_rule": {"WorkloadWaitCritical": "2m"}}},
}


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, check=False)


def _write(settings: Settings, out: Path) -> None:
    for rel, text in generate.render_all(settings).items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text, encoding="utf-8")


def test_promtool_accepts_the_committed_rules(promtool: str) -> None:
    done = _run(promtool, "check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_the_committed_unit_tests_pass_under_promtool(promtool: str) -> None:
    done = _run(promtool, "test", "rules", str(TESTS))
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_tier_threshold_has_a_before_and_after_case() -> None:
    doc = yaml.safe_load(TESTS.read_text())
    cases = {
        (c["alertname"], c["eval_time"], bool(c["exp_alerts"]))
        for t in doc["tests"]
        for c in t.get("alert_rule_test", [])
    }
    for tier in Settings().tier_policy().tiers:
        for name, threshold in (
            (alerting.QUEUE_WAIT_WARNING, tier.warn_after),
            (alerting.QUEUE_WAIT_CRITICAL, tier.critical_after),
        ):
            minutes = int(threshold // 60)
            assert (name, f"{minutes}m", True) in cases or (name, f"{minutes // 60}h", True) in cases
            assert any(n == name and not fired for n, _, fired in cases)


def test_a_changed_tier_policy_regenerates_rules_and_tests_that_still_pass(
    promtool: str, tmp_path: Path
) -> None:
    settings = settings_from_mapping(CUSTOM, env={})
    _write(settings, tmp_path)
    rules = (tmp_path / generate.RULES).read_text()
    assert 'tier="urgent"}) >= 90' in rules and 'tier="bulk"}) >= 10800' in rules
    assert 'tier="critical"' not in rules
    critical = [
        r
        for g in yaml.safe_load(rules)["groups"]
        for r in g["rules"]
        if r.get("alert") == alerting.QUEUE_WAIT_CRITICAL
    ]
    assert {r["for"] for r in critical} == {"2m"}  # the service's `for` of the alert it mirrors
    done = _run(promtool, "test", "rules", str(tmp_path / generate.TESTS))
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_fails_the_unit_tests_when_a_threshold_in_the_rules_moves(
    promtool: str, tmp_path: Path
) -> None:
    """The generated unit tests are not vacuous: rules whose warning threshold differs from the policy fail."""
    _write(Settings(), tmp_path)
    rules = tmp_path / generate.RULES
    rules.write_text(rules.read_text().replace('tier="critical"}) >= 300', 'tier="critical"}) >= 420'))
    done = _run(promtool, "test", "rules", str(tmp_path / generate.TESTS))
    assert done.returncode != 0
    assert "WatchtowerQueueWaitWarning" in done.stdout + done.stderr


def test_promtool_fails_the_unit_tests_when_the_stall_window_in_the_rules_moves(
    promtool: str, tmp_path: Path
) -> None:
    """The stall cases sit one evaluation either side of the window's edge (where Prometheus 3's left-open
    ranges and 2.x's closed ones differ), and still catch a window two evaluations longer."""
    _write(Settings(), tmp_path)
    rules = tmp_path / generate.RULES
    text = rules.read_text()
    stalled = 'changes(watchtower_last_evaluation_timestamp_seconds{job="watchtower"}[5m])'
    assert stalled in text
    rules.write_text(text.replace(stalled, stalled.replace("[5m]", "[7m]")))
    done = _run(promtool, "test", "rules", str(tmp_path / generate.TESTS))
    assert done.returncode != 0
    assert "WatchtowerEvaluationStalled" in done.stdout + done.stderr


def test_windows_span_four_scrapes_and_rules_avoid_what_prometheus_3_changed() -> None:
    text = RULES.read_text()
    assert "holt_winters" not in text
    assert 'le="' not in text  # le is "1.0" in Prometheus 3: never matched literally
    settings = settings_from_mapping(
        {"prometheus": {"url": "http://127.0.0.1:9", "scrape_interval": "2m"}}, env={}
    )
    files = generate.render_all(settings)
    # rate windows grow with the scrape interval: 4 × 2m
    assert "[8m]" in files[generate.RULES]


def test_every_alert_links_its_runbook_section() -> None:
    runbooks = (ROOT / "docs" / "runbooks.md").read_text()
    anchors = {line[3:].strip() for line in runbooks.splitlines() if line.startswith("## ")}
    doc = yaml.safe_load(RULES.read_text())
    alerts = [r for g in doc["groups"] for r in g["rules"] if "alert" in r]
    assert {a["alert"] for a in alerts} == set(alerting.ALERTNAMES)
    for a in alerts:
        url = a["annotations"]["runbook_url"]
        assert url == f"docs/runbooks.md#{a['alert'].lower()}"
        assert url.split("#")[1] in anchors, f"docs/runbooks.md has no section for {a['alert']}"
        # info: the picture is degraded; none: the InfoInhibitor, which only mutes
        assert a["labels"]["severity"] in ("warning", "critical", alerting.INFO) or (
            a["alert"] == alerting.INFO_INHIBITOR and a["labels"]["severity"] == "none"
        )
        assert a["annotations"]["summary"] and a["annotations"]["description"]


KEEP_FIRING = {"alerting": {"rules": {"keep_firing_for": "5m", "pending_for": "2m"}}}


def _alerts(rules_text: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for g in yaml.safe_load(rules_text)["groups"]:
        for r in g["rules"]:
            if "alert" in r:
                out.setdefault(r["alert"], []).append(r)
    return out


def test_the_wait_and_churn_rules_keep_firing_for_the_services_duration_and_the_health_rules_do_not() -> None:
    rules = _alerts(generate.render_all(settings_from_mapping(KEEP_FIRING, env={}))[generate.RULES])
    keeping = {name for name, rs in rules.items() if all(r.get("keep_firing_for") == "5m" for r in rs)}
    assert keeping == set(alerting.KEEP_FIRING)
    assert all("keep_firing_for" not in r for name in set(rules) - keeping for r in rules[name])
    # 0s, the default: no rule carries it, as no service alert keeps firing
    assert "keep_firing_for" not in RULES.read_text()


def test_a_condition_that_drops_for_one_evaluation_neither_resolves_nor_fires_again(
    promtool: str, tmp_path: Path
) -> None:
    _write(settings_from_mapping(KEEP_FIRING, env={}), tmp_path)
    tests = yaml.safe_load((tmp_path / generate.TESTS).read_text())["tests"]
    assert len(tests) == len(yaml.safe_load(TESTS.read_text())["tests"]) + 2  # a wait's dip, the churn's
    done = _run(promtool, "test", "rules", str(tmp_path / generate.TESTS))
    assert done.returncode == 0, done.stdout + done.stderr


def test_without_keep_firing_for_in_the_rules_the_dip_resolves_and_the_flap_cases_fail(
    promtool: str, tmp_path: Path
) -> None:
    """The flap cases are not vacuous: the same rules without `keep_firing_for` resolve during the dip."""
    _write(settings_from_mapping(KEEP_FIRING, env={}), tmp_path)
    rules = tmp_path / generate.RULES
    rules.write_text("\n".join(ln for ln in rules.read_text().splitlines() if "keep_firing_for" not in ln))
    done = _run(promtool, "test", "rules", str(tmp_path / generate.TESTS))
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert alerting.QUEUE_WAIT_WARNING in out and alerting.PREEMPTION_THRASH in out


def test_the_info_inhibitor_is_the_last_rule_and_watches_only_watchtowers_alerts() -> None:
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    last = rules[-1]
    assert last["alert"] == alerting.INFO_INHIBITOR  # it reads the ALERTS the rules before it wrote
    info = [r["alert"] for r in rules if r.get("labels", {}).get("severity") == alerting.INFO]
    assert info == list(alerting.DEGRADED_PICTURE)
    for name in alerting.ALERTNAMES:
        if name != alerting.INFO_INHIBITOR:
            assert name in last["expr"]
