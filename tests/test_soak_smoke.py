"""bench/soak.py at a tiny size for a few seconds: it still starts the service, feeds it, and reports every
figure, so the script the sizing comes from cannot rot. The figures themselves are not judged here (no timed
tests); the bench's own run is. Real parts: the service as `watchtower run`, the fake API server process,
the loopback webhook receiver; GPU usage (Prometheus) is left out to stay well under 30 s."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FIGURES = (
    "change → /api/v1/queue p50 / p99",
    "change → /metrics p50 / p99",
    "probe changes seen / not seen within 10 s",
    "/api/v1/queue p50 / p99",
    "lone /healthz p50 / max",
    "service CPU",
    "service RSS start / at 1/5 / end / peak",
    "RSS over time",
    "alert probes notified / expected",
    "notifications lost / duplicated",
)


def test_soak_reports_every_figure() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "soak.py"), "--pods", "300", "--rate", "20", "--clients", "4"]
        + ["--minutes", "0.1", "--warmup", "1", "--alert-every", "2", "--no-prometheus", "--httpx"],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    for figure in FIGURES:
        assert figure in out.stdout, f"{figure!r} missing from:\n{out.stdout}"
    # A probe change the service never showed would be a broken feed, not a slow one.
    assert re.search(r"probe changes seen / not seen within 10 s\s+\d+ / 0\b", out.stdout), out.stdout
    assert re.search(r"alert probes notified / expected\s+(\d+) / \1\b", out.stdout), out.stdout
    assert re.search(r"notifications lost / duplicated\s+0 / 0\b", out.stdout), out.stdout
