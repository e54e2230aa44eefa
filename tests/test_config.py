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
