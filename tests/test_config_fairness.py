"""`fairness.smtp_receiver` and `fairness.send` against `alerting.receivers`: the report goes out with an
email receiver's SMTP settings, so naming none (or sending with none configured) is refused at load and by
`watchtower check-config`, with the YAML path, as the other cross-checks are."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from watchtower.config import ConfigError, settings_from_mapping
from watchtower.config.model import Settings

RECEIVERS = (
    "alerting:\n"
    "  route: {receiver: ops}\n"
    "  receivers:\n"
    "    - {name: ops, email: [{to: [ops@example.com], smarthost: 127.0.0.1}]}\n"
    "    - {name: hooks, webhooks: [{url: 'https://hooks.example.com/x'}]}\n"
)


def check(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    f = tmp_path / "c.yaml"
    f.write_text(text)
    cmd = [sys.executable, "-m", "watchtower.cli", "check-config", str(f)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        pytest.param(
            RECEIVERS + "fairness: {send: true, smtp_receiver: opps}\n",
            ["fairness.smtp_receiver: 'opps' is not a receiver (email receivers in alerting.receivers: ops)"],
            id="an smtp_receiver that is not a receiver, with its path",
        ),
        pytest.param(
            RECEIVERS + "fairness: {smtp_receiver: hooks}\n",
            [
                "fairness.smtp_receiver: 'hooks' has no email integration "
                "(email receivers in alerting.receivers: ops)"
            ],
            id="an smtp_receiver with no email",
        ),
        pytest.param(
            "fairness: {send: true}\n",
            [
                "fairness.send: sending the report needs an email receiver in alerting.receivers; there is none"
            ],
            id="sending with no email receiver",
        ),
        pytest.param(
            # The model validator does not run once a field fails: the loader's second pass still finds it.
            RECEIVERS + "fairness: {smtp_receiver: opps, step: never}\n",
            [
                "fairness.step: 'never' is not a duration: write 30s, 5m, 2h, 1h30m or 7d",
                "fairness.smtp_receiver: 'opps' is not a receiver (email receivers in alerting.receivers: ops)",
            ],
            id="listed beside an unrelated field error",
        ),
    ],
)
def test_check_config_refuses_it_and_lists_each_problem_on_its_line(
    tmp_path: Path, text: str, problems: list[str]
) -> None:
    r = check(tmp_path, text)
    assert r.returncode == 2
    listed = [line.strip() for line in r.stderr.splitlines()[1:]]  # after "...: configuration is not valid"
    assert listed == problems


def test_a_named_email_receiver_and_the_default_pass(tmp_path: Path) -> None:
    assert check(tmp_path, RECEIVERS + "fairness: {send: true, smtp_receiver: ops}\n").returncode == 0
    assert check(tmp_path, RECEIVERS + "fairness: {send: true}\n").returncode == 0
    s = settings_from_mapping({}, env={})  # not sending, no receiver named: nothing to check
    assert s.fairness.smtp_receiver == "" and not s.fairness.send


def test_loading_in_code_refuses_it_too() -> None:
    with pytest.raises(ConfigError, match=r"fairness\.smtp_receiver: 'nobody' is not a receiver"):
        settings_from_mapping({"fairness": {"smtp_receiver": "nobody"}}, env={})
    with pytest.raises(ValueError, match="fairness.send: sending the report needs an email receiver"):
        Settings.model_validate({"fairness": {"send": True}})
