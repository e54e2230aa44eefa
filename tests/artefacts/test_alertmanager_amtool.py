"""The generated Alertmanager configuration with the real amtool, Debian's (prometheus-alertmanager 0.25) and
0.35 built from its Go module (users run both): it loads, and Alertmanager routes an alert to the receiver
Watchtower's own router picks for the same tree."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest
import yaml

from alerts import alerting, generate
from alerts.alertmanager import INHIBITOR_RECEIVER, SecretInlineError, alertmanager_config
from watchtower.config import settings_from_mapping

ROOT = Path(__file__).parents[2]


@pytest.fixture(params=["debian", "current"])
def amtool(request) -> str:
    """Each test runs with both amtools; either missing fails (system-deps.sh, build-alertmanager.sh)."""
    from tests.alerting.alertmanager import binaries

    return binaries(request.param)[1]


def _routing(secret: Path) -> dict:
    return {
        "alerting": {
            "route": {
                "receiver": "platform",
                "group_by": ["alertname", "namespace"],
                "group_wait": "10s",
                "routes": [
                    {
                        "matchers": ['team="vision"'],
                        "receiver": "vision",
                        "repeat_interval": "1h",
                        "routes": [{"matchers": ['severity="critical"'], "receiver": "vision-pager"}],
                    },
                    {
                        "matchers": ['tier=~"critical|high"', 'severity="critical"'],
                        "receiver": "platform-pager",
                    },
                ],
            },
            "receivers": [
                {
                    "name": "platform",
                    "email": [{"to": ["platform@example.org"], "smarthost": "smtp.example.org"}],
                },
                {
                    "name": "vision",
                    "email": [
                        {
                            "to": ["vision@example.org"],
                            "smarthost": "smtp.example.org",
                            "port": 587,
                            "username": "watchtower",
                            "password_file": str(secret),
                        }
                    ],
                },
                {"name": "vision-pager", "webhooks": [{"url": "https://pager.example.org/hook"}]},
                {"name": "platform-pager", "webhooks": [{"url": "https://pager.example.org/platform"}]},
            ],
        }
    }


@pytest.fixture
def routed(tmp_path: Path):
    secret = tmp_path / "smtp-password"
    secret.write_text("s3cret-value\n")
    settings = settings_from_mapping(_routing(secret), env={})
    path = tmp_path / "alertmanager.yaml"
    path.write_text(generate.render_all(settings)[generate.ALERTMANAGER])
    return settings, path


def _amtool(amtool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([amtool, *args], capture_output=True, text=True, check=False)


def test_amtool_accepts_the_committed_configuration(amtool: str) -> None:
    done = _amtool(amtool, "check-config", str(ROOT / "alerts" / generate.ALERTMANAGER))
    assert done.returncode == 0, done.stdout + done.stderr


def test_amtool_accepts_a_configuration_with_team_routes_and_receivers(amtool: str, routed) -> None:
    _, path = routed
    done = _amtool(amtool, "check-config", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 receivers" in done.stdout  # the four configured, and the InfoInhibitor's


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (
            {"alertname": "WorkloadWaitCritical", "severity": "critical", "team": "vision", "tier": "low"},
            "vision-pager",
        ),
        (
            {"alertname": "WorkloadWaitWarning", "severity": "warning", "team": "vision", "tier": "high"},
            "vision",
        ),
        (
            {"alertname": "WatchtowerQueueWaitCritical", "severity": "critical", "tier": "high"},
            "platform-pager",
        ),
        (
            {"alertname": "WorkloadWaitCritical", "severity": "critical", "team": "nlp", "tier": "low"},
            "platform",
        ),
    ],
)
def test_alertmanager_routes_as_watchtower_does(amtool: str, routed, labels: dict, receiver: str) -> None:
    settings, path = routed
    ours = [r.receiver for r in settings.alerting.route_tree().match(labels)]
    assert ours == [receiver]
    args = [f"{k}={v}" for k, v in labels.items()]
    done = _amtool(
        amtool, "config", "routes", "test", f"--config.file={path}", f"--verify.receivers={receiver}", *args
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == receiver


def test_amtool_verification_fails_for_the_wrong_receiver(amtool: str, routed) -> None:
    _, path = routed
    done = _amtool(
        amtool,
        "config",
        "routes",
        "test",
        f"--config.file={path}",
        "--verify.receivers=platform",
        "severity=critical",
        "team=vision",
    )
    assert done.returncode != 0


def test_secrets_are_referenced_by_file_never_written(routed) -> None:
    _, path = routed
    text = path.read_text()
    assert "s3cret-value" not in text
    vision = next(r for r in yaml.safe_load(text)["receivers"] if r["name"] == "vision")
    assert vision["email_configs"][0]["auth_password_file"].endswith("smtp-password")


def test_a_password_not_from_a_file_is_refused_with_the_path_to_fix() -> None:
    settings = settings_from_mapping(
        {
            "alerting": {
                "route": {"receiver": "r"},
                "receivers": [
                    {"name": "r", "email": [{"to": ["a@example.org"], "username": "u", "password": "inline"}]}
                ],
            }
        },
        env={},
    )
    with pytest.raises(
        SecretInlineError, match=r"alerting\.receivers\[0\]\.email\[0\]\.password: give password_file"
    ):
        alertmanager_config(settings)


def test_critical_inhibits_warning_of_the_same_workload_and_tier() -> None:
    doc = yaml.safe_load((ROOT / "alerts" / generate.ALERTMANAGER).read_text())
    (rule,) = [r for r in doc["inhibit_rules"] if r["source_matchers"] == ['severity="critical"']]
    assert rule["source_matchers"] == ['severity="critical"']
    # The never alerts are left out: a critical wait must not mute the news that the work can never start
    # (which in turn mutes that wait: each would mute the other).
    assert rule["target_matchers"] == [
        'severity="warning"',
        f'alertname!~"WorkloadCanNeverStart|{alerting.NEVER_START}"',
    ]
    assert {"namespace", "workload", "tier"} <= set(rule["equal"])


@pytest.fixture(params=["debian", "current"])
def flavour(request) -> str:
    return request.param


def _statuses(url: str, want: int, timeout: float = 20.0) -> dict[str, list[str]]:
    """Return "alertname/team" → the fingerprints inhibiting it, once Alertmanager holds `want` alerts and
    its inhibitor has seen them (it learns of new alerts asynchronously)."""
    deadline = time.monotonic() + timeout
    got: dict[str, list[str]] = {}
    while time.monotonic() < deadline:
        alerts = httpx.get(url + "/api/v2/alerts", timeout=5).json()
        got = {
            f"{a['labels']['alertname']}/{a['labels'].get('team', '')}": a["status"]["inhibitedBy"]
            for a in alerts
        }
        if len(got) == want and any(got.values()):
            time.sleep(0.5)  # one more read: inhibitions may still be arriving
            alerts = httpx.get(url + "/api/v2/alerts", timeout=5).json()
            return {
                f"{a['labels']['alertname']}/{a['labels'].get('team', '')}": a["status"]["inhibitedBy"]
                for a in alerts
            }
        time.sleep(0.2)
    return got


def test_alertmanager_mutes_a_quota_blocked_teams_waits_and_info_alerts_while_the_info_inhibitor_fires(
    flavour: str, tmp_path: Path
) -> None:
    from tests.alerting.alertmanager import Alertmanager, binaries

    exe, _ = binaries(flavour)
    config = tmp_path / "alertmanager.yml"
    config.write_text((ROOT / "alerts" / generate.ALERTMANAGER).read_text())
    am = Alertmanager(exe, config, tmp_path / "data").start()
    workload = {"severity": "warning", "kind": "Job", "tier": "low"}
    alerts = [
        {"alertname": "WorkloadQuotaBlocked", "team": "vision", "namespace": "vision", "workload": "a"},
        # the same team in another of its namespaces: muted all the same
        {"alertname": "WorkloadWaitWarning", "team": "vision", "namespace": "vision-dev", "workload": "b"},
        {"alertname": "WorkloadWaitWarning", "team": "nlp", "namespace": "nlp", "workload": "c"},
        {"alertname": alerting.OBJECTS_UNREADABLE, "severity": alerting.INFO, "kind": "Pod"},
        {"alertname": alerting.INFO_INHIBITOR, "severity": "none"},
    ]
    try:
        body = [{"labels": {**workload, **a} if "workload" in a else a} for a in alerts]
        httpx.post(am.url + "/api/v2/alerts", json=body, timeout=5).raise_for_status()
        got = _statuses(am.url, len(alerts))
    finally:
        am.stop()
    assert got["WorkloadWaitWarning/vision"] != []
    assert got["WorkloadWaitWarning/nlp"] == []  # another team's wait still notifies
    assert got["WorkloadQuotaBlocked/vision"] == []
    assert got[f"{alerting.OBJECTS_UNREADABLE}/"] != []
    assert got[f"{alerting.INFO_INHIBITOR}/"] == []


def test_alertmanager_tells_work_that_can_never_start_once_not_also_as_waiting(
    flavour: str, tmp_path: Path
) -> None:
    """The service's never alert and wait alerts, pushed to the real Alertmanager with the committed
    configuration: the never alert mutes its own workload's waits, nobody else's, and no critical wait (of the
    workload or of its tier in the generated rules) mutes a never alert."""
    from tests.alerting.alertmanager import Alertmanager, binaries

    exe, _ = binaries(flavour)
    config = tmp_path / "alertmanager.yml"
    config.write_text((ROOT / "alerts" / generate.ALERTMANAGER).read_text())
    am = Alertmanager(exe, config, tmp_path / "data").start()
    huge = {"kind": "Pod", "tier": "critical", "team": "vision", "namespace": "vision", "workload": "huge"}
    alerts = [
        {**huge, "alertname": "WorkloadCanNeverStart", "severity": "warning", "reason": "node_resources"},
        {**huge, "alertname": "WorkloadWaitWarning", "severity": "warning"},
        {**huge, "alertname": "WorkloadWaitCritical", "severity": "critical"},
        # another workload of the same team and tier waits for room: told as ever
        {**huge, "workload": "small", "alertname": "WorkloadWaitWarning", "severity": "warning"},
        # the generated rules' own pair, per tier: the tier's critical wait does not mute its never alert
        {"alertname": alerting.NEVER_START, "severity": "warning", "tier": "critical", "reason": "gang"},
        {"alertname": alerting.QUEUE_WAIT_CRITICAL, "severity": "critical", "tier": "critical"},
    ]
    try:
        httpx.post(
            am.url + "/api/v2/alerts", json=[{"labels": a} for a in alerts], timeout=5
        ).raise_for_status()
        deadline = time.monotonic() + 20
        while True:
            got = {
                (a["labels"]["alertname"], a["labels"].get("workload", "")): a["status"]["inhibitedBy"]
                for a in httpx.get(am.url + "/api/v2/alerts", timeout=5).json()
            }
            muted = {k for k, v in got.items() if v}
            if len(got) == len(alerts) and len(muted) >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        time.sleep(0.5)  # one more read: inhibitions may still be arriving
        got = {
            (a["labels"]["alertname"], a["labels"].get("workload", "")): a["status"]["inhibitedBy"]
            for a in httpx.get(am.url + "/api/v2/alerts", timeout=5).json()
        }
    finally:
        am.stop()
    assert got[("WorkloadWaitWarning", "huge")] != []
    assert got[("WorkloadWaitCritical", "huge")] != []
    assert got[("WorkloadCanNeverStart", "huge")] == []
    assert got[("WorkloadWaitWarning", "small")] == []
    assert got[(alerting.NEVER_START, "")] == []
    assert got[(alerting.QUEUE_WAIT_CRITICAL, "")] == []


def test_the_info_inhibitor_is_routed_to_a_receiver_that_notifies_nobody(amtool: str) -> None:
    path = ROOT / "alerts" / generate.ALERTMANAGER
    done = _amtool(
        amtool, "config", "routes", "test", f"--config.file={path}", f"alertname={alerting.INFO_INHIBITOR}"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == INHIBITOR_RECEIVER
    receivers = {r["name"]: r for r in yaml.safe_load(path.read_text())["receivers"]}
    assert set(receivers[INHIBITOR_RECEIVER]) == {"name"}


def test_a_receiver_named_as_the_inhibitors_is_refused() -> None:
    settings = settings_from_mapping(
        {
            "alerting": {
                "route": {"receiver": INHIBITOR_RECEIVER},
                "receivers": [{"name": INHIBITOR_RECEIVER}],
            }
        },
        env={},
    )
    with pytest.raises(ValueError, match="name yours otherwise"):
        alertmanager_config(settings)
