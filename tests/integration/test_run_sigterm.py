"""`watchtower run` stopped by SIGTERM while it ticks as fast as it can: exit 0, and nothing in its log
reads as a failure (no traceback, no "Error running job"), because on-call reads that log after every
rollout.

The exact interleavings (a job cut short mid-run, a job handed to the loop in the turn of the stop) are made
deterministic in tests/unit/adapters/test_scheduled_jobs.py; here the real process is stopped several times at
arbitrary moments of a 20 ms tick cycle, with the weekly report's store and the simulator running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

STOPS = 4


def _run_and_stop(tmp_path: Path, k: int) -> tuple[int | None, str]:
    cfg = tmp_path / f"watchtower-{k}.yaml"
    cfg.write_text(
        "cluster:\n  source: sim\n"
        "simulator:\n  speed: 600\n"
        "queue:\n  evaluate_every: 0.02\n"
        f"store:\n  path: {tmp_path / f'state-{k}.db'}\n"
    )
    p = subprocess.Popen(
        [sys.executable, "-m", "watchtower.cli", "run", "--config", str(cfg), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
    )
    lines: list[str] = []
    serving = threading.Event()

    def read() -> None:
        assert p.stdout is not None
        for line in p.stdout:
            lines.append(line)
            if "serving at" in line:
                serving.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert serving.wait(60), "".join(lines)
        time.sleep(1.5 + 0.37 * k)  # a different moment of the tick cycle each time
        p.send_signal(signal.SIGTERM)
        rc: int | None = p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        rc = None
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        reader.join(5)
    return rc, "".join(lines)


def test_sigterm_mid_tick_exits_0_with_no_traceback_in_the_log(tmp_path: Path) -> None:
    for k in range(STOPS):
        rc, out = _run_and_stop(tmp_path, k)
        assert rc == 0, f"stop {k}: exit {rc}\n{out[-3000:]}"
        assert "SIGTERM: stopping" in out, out[-3000:]
        for bad in ("Traceback", "Error running job", "CancelledError"):
            assert bad not in out, f"stop {k}: {bad!r} in the log:\n{out[-4000:]}"
