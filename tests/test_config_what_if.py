"""`replay.what_if`: each policy the weekly report replays is checked at load and by `watchtower check-config`
as `watchtower replay --policy` checks a policy file, each problem at its path in the configuration (and
its file's name when it is one); a policy file is read beside the configuration file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from watchtower.config import ConfigError, load_settings, settings_from_mapping


def check(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    f = tmp_path / "c.yaml"
    f.write_text(text)
    cmd = [sys.executable, "-m", "watchtower.cli", "check-config", str(f)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd="/")


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        pytest.param(
            "replay:\n  what_if:\n    - {name: a, policy: {preemptoin: {medium: [low]}}}\n",
            ["replay.what_if[0].policy.preemptoin: Extra inputs are not permitted"],
            id="a wrong key, at its path",
        ),
        pytest.param(
            "replay:\n  what_if:\n    - {name: a, policy: {preemption: {medium: [lowest]}}}\n",
            [
                "replay.what_if[0].policy.preemption.medium: unknown tier 'lowest' "
                "(tiers: critical, high, medium, low)"
            ],
            id="an unknown tier, against the configuration's own tiers",
        ),
        pytest.param(
            "tiers:\n  - {name: only, min_priority: 0, warn_after: 1h, critical_after: 2h}\n"
            "replay:\n  what_if:\n    - {name: a, policy: {preemption: {medium: never}}}\n",
            ["replay.what_if[0].policy.preemption.medium: unknown tier 'medium' (tiers: only)"],
            id="the tiers fall back to the configuration's",
        ),
        pytest.param(
            "replay:\n  what_if:\n    - {name: a, policy: medium.yaml}\n",
            [
                "replay.what_if[0].policy (medium.yaml): nodes.count: Input should be greater than or equal to 1"
            ],
            id="a file's problem, with the file's name",
        ),
        pytest.param(
            "replay:\n  what_if:\n    - {name: a, policy: gone.yaml}\n",
            ["replay.what_if[0].policy: cannot read 'gone.yaml': No such file or directory"],
            id="a file that is not there",
        ),
        pytest.param(
            "replay:\n  what_if:\n    - {name: a}\n    - {name: a}\n",
            ["replay.what_if: two policies are named 'a': give each its own name"],
            id="two policies of one name",
        ),
        pytest.param(
            "replay:\n  what_if:\n    - {name: observed}\n",
            ["replay.what_if[0].name: 'observed' names one of the report's own runs; choose another name"],
            id="a name the section uses itself",
        ),
    ],
)
def test_check_config_refuses_a_bad_what_if_policy_and_names_its_path(
    tmp_path: Path, text: str, problems: list[str]
) -> None:
    (tmp_path / "medium.yaml").write_text("preemption: {medium: [low]}\nnodes: {count: 0, gpus: 8}\n")
    r = check(tmp_path, text)
    assert r.returncode == 2, r.stderr
    listed = [line.strip() for line in r.stderr.splitlines()[1:]]  # after "...: configuration is not valid"
    assert listed == problems


def test_a_policy_file_beside_the_configuration_is_read_into_it(tmp_path: Path) -> None:
    (tmp_path / "medium.yaml").write_text("preemption: {medium: [low]}\nname: ignored\n")
    r = check(tmp_path, "replay:\n  what_if:\n    - {name: medium preempts low, policy: medium.yaml}\n")
    assert r.returncode == 0, r.stderr
    s = load_settings(tmp_path / "c.yaml", env={})
    (w,) = s.replay.what_if
    assert (w.name, w.policy) == (
        "medium preempts low",
        {"preemption": {"medium": ["low"]}, "name": "ignored"},
    )


def test_loading_in_code_refuses_it_too() -> None:
    with pytest.raises(
        ConfigError, match=r"replay\.what_if\[0\]\.policy\.quotas: team 'nlp': a quota cannot be"
    ):
        settings_from_mapping(
            {"replay": {"what_if": [{"name": "a", "policy": {"quotas": {"nlp": -1}}}]}}, env={}
        )
