"""kubectl users put the connection flags after the command (`kubectl watchtower why NAME --context prod`);
the plugin reads them wherever they stand."""

from __future__ import annotations

import subprocess
import sys

from watchtower.commands.kubectl.app import flags_first


def test_connection_flags_after_the_command_move_before_it() -> None:
    argv = ["why", "train", "-n", "ml", "--context", "prod", "--server=http://x:1", "-o", "json"]
    assert flags_first(argv) == [
        "--context",
        "prod",
        "--server=http://x:1",
        "why",
        "train",
        "-n",
        "ml",
        "-o",
        "json",
    ]
    assert flags_first(["queue", "--", "--context"]) == ["queue", "--", "--context"]


def test_a_flag_after_the_command_reaches_the_plugin() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "watchtower.commands.kubectl.app",
            "why",
            "x",
            "--server",
            "http://127.0.0.1:9",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("error: Watchtower at http://127.0.0.1:9 did not answer"), done.stderr
