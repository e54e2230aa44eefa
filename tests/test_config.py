"""`watchtower check-config` and the settings loader: every error with its YAML path, env and file secrets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from watchtower.config import ConfigError, load_settings, settings_from_mapping

EXAMPLE = Path(__file__).resolve().parent.parent / "watchtower" / "config.example.yaml"
CLI = [sys.executable, "-m", "watchtower.cli"]


def check(path: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "check-config", str(path)], capture_output=True, text=True, env=env, timeout=60
    )


def test_shipped_example_passes():
    r = check(EXAMPLE)
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout
    s = load_settings(EXAMPLE, env={})
    assert [t.name for t in s.tier_policy().tiers] == ["critical", "high", "medium", "low"]


def test_every_error_is_listed_with_its_yaml_path_and_exit_is_non_zero(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "cluster:\n  page_size: 0\n  surprise: 1\n"
        "tiers:\n"
        "  - {name: critical, min_priority: 1000000, warn_after: 15m, critical_after: 5m}\n"
        "  - {name: Low!, min_priority: 0, warn_after: soon, critical_after: 8h}\n"
        "training:\n  image_pattern: '(['\n"
        "server:\n  port: 70000\n"
    )
    r = check(bad)
    assert r.returncode == 2
    for path in [
        "cluster.page_size",
        "cluster.surprise",
        "tiers[0]",
        "tiers[1].name",
        "tiers[1].warn_after",
        "training.image_pattern",
        "server.port",
    ]:
        assert f"  {path}:" in r.stderr, (path, r.stderr)
    assert "critical_after (300s) is shorter than warn_after (900s)" in r.stderr
    assert "not a duration" in r.stderr


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("tiers: []\n", "tiers:"),
        (
            "tiers:\n  - {name: a, min_priority: 1, warn_after: 1m, critical_after: 2m}\n"
            "  - {name: a, min_priority: 2, warn_after: 1m, critical_after: 2m}\n",
            "repeated: a",
        ),
        ("cluster: [1, 2\n", "not valid YAML"),
        ("- just\n- a list\n", "expected a mapping"),
    ],
)
def test_structural_problems_are_reported(tmp_path, text, expect):
    f = tmp_path / "c.yaml"
    f.write_text(text)
    r = check(f)
    assert r.returncode == 2 and expect in r.stderr, r.stderr


def test_missing_file_is_a_clear_error(tmp_path):
    r = check(tmp_path / "nope.yaml")
    assert r.returncode == 2 and "cannot read" in r.stderr


def test_api_token_from_the_environment():
    s = settings_from_mapping({}, env={"WATCHTOWER_SERVER__API_TOKEN": "s3cret"})
    assert s.server.api_token is not None and s.server.api_token.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(s)


def test_env_override_beats_the_file_and_is_validated():
    s = settings_from_mapping({"server": {"port": 1}}, env={"WATCHTOWER_SERVER__PORT": "9090"})
    assert s.server.port == 9090
    with pytest.raises(ConfigError) as e:
        settings_from_mapping({}, env={"WATCHTOWER_SERVER__PORT": "many"})
    assert any(p.startswith("server.port:") for p in e.value.problems)


def test_secret_read_from_a_file(tmp_path):
    secret = tmp_path / "token"
    secret.write_text("from-file\n")
    s = settings_from_mapping({"server": {"api_token_file": str(secret)}}, env={})
    assert s.server.api_token is not None and s.server.api_token.get_secret_value() == "from-file"
    with pytest.raises(ConfigError) as e:
        settings_from_mapping({"server": {"api_token_file": str(tmp_path / "absent")}}, env={})
    assert e.value.problems[0].startswith("server.api_token_file: cannot read")


def test_check_config_reads_the_environment_too(tmp_path):
    import os

    f = tmp_path / "c.yaml"
    f.write_text("server: {}\n")
    r = check(f, env={**os.environ, "WATCHTOWER_SERVER__PORT": "-1"})
    assert r.returncode == 2 and "server.port" in r.stderr


def test_store_retention_defaults_to_5d_for_silences_and_7d_for_sent_notifications_and_must_be_positive():
    default = settings_from_mapping({}, env={}).alerting.retention
    assert (default.silences, default.delivered) == (5 * 86400, 7 * 86400)
    assert load_settings(EXAMPLE, env={}).alerting.retention == default  # the example shows the defaults
    s = settings_from_mapping({"alerting": {"retention": {"silences": "120h", "delivered": "1d"}}}, env={})
    assert (s.alerting.retention.silences, s.alerting.retention.delivered) == (120 * 3600, 86400)
    with pytest.raises(ConfigError) as e:
        settings_from_mapping({"alerting": {"retention": {"silences": "0s", "delivered": "soon"}}}, env={})
    assert [p.split(":")[0] for p in e.value.problems] == [
        "alerting.retention.silences",
        "alerting.retention.delivered",
    ]


def test_the_old_alerting_thrash_window_is_refused_and_names_the_key_that_replaced_it():
    with pytest.raises(ConfigError) as e:
        settings_from_mapping({"alerting": {"rules": {"thrash_window": "2h"}}}, env={})
    assert "alerting.rules.thrash_window: moved to queue.thrash_window" in str(e.value)
    assert (
        settings_from_mapping({"queue": {"thrash_window": "2h"}}, env={}).queue_policy().thrash_window == 7200
    )


def test_three_independent_mistakes_are_listed_in_one_run_in_file_order(tmp_path):
    # Each used to hide the next: the duplicate tier name (a cross-field check) only showed once tiers[1]
    # was fixed, and the unknown receiver only once the webhook URL was.
    f = tmp_path / "c.yaml"
    f.write_text(
        "tiers:\n"
        "  - {name: gpu, min_priority: 10, warn_after: 5m, critical_after: 15m}\n"
        "  - {name: gpu, min_priority: 0, warn_after: soon, critical_after: 8h}\n"
        "alerting:\n"
        "  route: {receiver: pager}\n"
        "  receivers: [{name: team, webhooks: [{url: 'ftp://x'}]}]\n"
    )
    r = check(f)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        f"{f}: configuration is not valid, 4 problems:",
        "  tiers[1].warn_after: 'soon' is not a duration: write 30s, 5m, 2h, 1h30m or 7d",
        "  tiers: tier names must be unique; repeated: gpu",
        "  alerting.receivers[0].webhooks[0].url: String should match pattern '^https?://'",
        "  alerting.route.receiver: 'pager' is not one of the receivers (team)",
    ]


def test_a_secret_written_in_the_file_passes_with_a_warning_that_never_shows_it(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text(
        "server:\n  api_token: hunter2\n"
        "alerting:\n"
        "  route: {receiver: team}\n"
        "  receivers:\n"
        "    - name: team\n"
        "      email: [{to: [ops@example.com], password: pw-in-the-file}]\n"
        "      webhooks: [{url: 'https://hooks.example.com/x', secret: whsec_MDEyMzQ1Njc4OWFiY2RlZg==}]\n"
    )
    r = check(f)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [
        f"{f}: warning: server.api_token is a secret written in the configuration file; give it as "
        "server.api_token_file (a file, such as a mounted Kubernetes Secret) or the environment variable "
        "WATCHTOWER_SERVER__API_TOKEN",
        f"{f}: warning: alerting.receivers[0].email[0].password is a secret written in the configuration file; "
        "give it as alerting.receivers[0].email[0].password_file (a file, such as a mounted Kubernetes Secret)",
        f"{f}: warning: alerting.receivers[0].webhooks[0].secret is a secret written in the configuration file; "
        "give it as alerting.receivers[0].webhooks[0].secret_file (a file, such as a mounted Kubernetes Secret)",
    ]
    for secret in ("hunter2", "pw-in-the-file", "MDEyMzQ1Njc4OWFiY2RlZg"):
        assert secret not in r.stdout + r.stderr
    assert r.stdout.startswith(f"{f}: OK")


def test_a_secret_from_the_environment_or_a_file_gives_no_warning(tmp_path):
    import os

    token = tmp_path / "token"
    token.write_text("from-a-file\n")
    f = tmp_path / "c.yaml"
    f.write_text(f"server:\n  api_token_file: {token}\n")
    assert check(f).stderr == ""
    f.write_text("server: {}\n")
    assert check(f, env={**os.environ, "WATCHTOWER_SERVER__API_TOKEN": "from-env"}).stderr == ""


def test_a_secret_is_warned_about_even_when_the_file_is_invalid(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("server:\n  api_token: hunter2\n  port: -1\n")
    r = check(f)
    assert r.returncode == 2
    assert "warning: server.api_token is a secret written in the configuration file" in r.stderr
    assert "  server.port:" in r.stderr and "hunter2" not in r.stderr


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("queue:\n  evaluate_every: 0s\n", "queue.evaluate_every"),
        ("queue:\n  quota_window: 0s\n", "queue.quota_window"),
        ("queue:\n  thrash_window: 0\n", "queue.thrash_window"),
        ("cluster:\n  watch_timeout: 0s\n", "cluster.watch_timeout"),
        ("cluster:\n  stale_after: 0s\n", "cluster.stale_after"),
        (
            "tiers:\n  - {name: a, min_priority: 0, warn_after: 0s, critical_after: 1h}\n",
            "tiers[0].warn_after",
        ),
        ("alerting:\n  route: {receiver: default, repeat_interval: 0s}\n", "alerting.route.repeat_interval"),
        ("alerting:\n  route: {receiver: default, group_interval: 0s}\n", "alerting.route.group_interval"),
        ("alerting:\n  delivery: {backoff_base: 0s}\n", "alerting.delivery.backoff_base"),
        ("alerting:\n  rules: {gang_stall_after: 0s}\n", "alerting.rules.gang_stall_after"),
        ("prometheus:\n  url: http://p:9090\n  query_every: 0s\n", "prometheus.query_every"),
    ],
)
def test_a_zero_interval_is_refused_with_its_path(tmp_path, text, path):
    f = tmp_path / "c.yaml"
    f.write_text(text)
    r = check(f)
    assert r.returncode == 2
    assert f"  {path}: must be longer than 0s" in r.stderr.splitlines(), r.stderr


def test_zero_stays_allowed_where_it_means_something():
    s = settings_from_mapping(
        {
            "cluster": {"resync_every": "0s"},  # never re-list unless told 410 Gone
            "alerting": {
                "route": {"receiver": "default", "group_wait": "0s"},  # send the first notification at once
                "rules": {"pending_for": "0s", "keep_firing_for": "0s"},
            },
        },
        env={},
    )
    assert s.cluster.resync_every == 0 and s.alerting.route.group_wait == 0


def _uncomment_blocks(text: str) -> str:
    """Return the example with its commented-out blocks (`# key:` alone, then deeper `#   ...` lines) live."""
    import re

    out, indent = [], None
    for line in text.splitlines():
        start = re.match(r"^(\s*)# ([a-z_]+:\s*(#.*)?)$", line)
        if start:
            indent = start.group(1)
            out.append(indent + start.group(2))
        elif indent is not None and re.match(rf"^{indent}# ( +\S|- )", line):
            out.append(indent + line[len(indent) + 2 :])
        else:
            indent = None
            out.append(line)
    return "\n".join(out) + "\n"


def test_the_example_with_its_commented_alerting_and_prometheus_blocks_uncommented_passes(tmp_path):
    live = _uncomment_blocks(EXAMPLE.read_text())
    f = tmp_path / "example.yaml"
    f.write_text(live)
    for secret in ("smtp-password", "webhook-secret"):
        (tmp_path / secret).write_text("whsec_MDEyMzQ1Njc4OWFiY2RlZg==\n")
        live = live.replace(f"/var/run/secrets/watchtower/{secret}", str(tmp_path / secret))
    f.write_text(live)
    r = check(f)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    s = load_settings(f, env={})
    assert [r.name for r in s.alerting.receivers] == ["platform", "oncall"]
    assert s.alerting.receivers[0].email[0].password is not None
    assert s.alerting.receivers[1].webhooks[0].secret is not None
    assert [c.receiver for c in s.alerting.route_tree().routes] == ["oncall"]
    assert s.prometheus is not None and s.prometheus.url == "http://prometheus.monitoring:9090"


def test_the_configuration_reference_lists_every_key_of_the_models_and_no_other():
    from watchtower.config.reference import documented_keys, render

    doc = (EXAMPLE.parent.parent / "docs" / "configuration.md").read_text()
    assert render() in doc, "stale: run python -m watchtower.config.reference docs/configuration.md"
    keys = documented_keys()
    for key in (
        "server.api_token",
        "alerting.receivers[].webhooks[].slack_compatible",
        "prometheus.idle_window",
    ):
        assert key in keys
    for key in ("alerting.route.group_by", "alerting.route.group_wait", "alerting.route.repeat_interval"):
        assert key in keys
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("external_url", "watchtower.example.com"),  # no scheme: every alert's link would be relative
        ("external_url", "https://"),
        ("dashboard_url", "grafana/d/abc"),
        ("runbook_url", "ftp://wiki.example.com/runbooks"),
        ("external_url", "https://watchtower.example.com/a b"),
    ],
)
def test_a_link_alerts_carry_must_be_an_absolute_http_url_and_check_config_names_it(tmp_path, key, value):
    f = tmp_path / "c.yaml"
    f.write_text(f"server:\n  {key}: '{value}'\n")
    r = check(f)
    assert r.returncode == 2, r.stderr
    assert f"server.{key}" in r.stderr and "not an http(s) URL of a page users open" in r.stderr, r.stderr


def test_absolute_links_pass_unchanged_and_the_optional_ones_may_stay_empty():
    s = settings_from_mapping(
        {"server": {"external_url": "https://wt.example.com/", "runbook_url": "https://wiki.example.com/rb/"}}
    )
    assert (s.server.external_url, s.server.runbook_url, s.server.dashboard_url) == (
        "https://wt.example.com/",
        "https://wiki.example.com/rb/",
        "",
    )
