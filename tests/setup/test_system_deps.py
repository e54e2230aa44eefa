"""tests/setup/system-deps.sh: what `make test` says it installs on a machine that has none of it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).with_name("system-deps.sh")


def test_each_missing_package_is_named_once(tmp_path: Path) -> None:
    # A PATH with bash and coreutils only: none of prometheus, promtool, amtool, chromium, victoria-metrics, wrk,
    # the image tools.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash", "id", "env"):
        (bindir / tool).symlink_to(
            f"/usr/bin/{tool}" if Path(f"/usr/bin/{tool}").exists() else f"/bin/{tool}"
        )
    env = {"PATH": str(bindir), "WATCHTOWER_DEPS_DRY_RUN": "1", "HOME": os.environ.get("HOME", "/root")}
    r = subprocess.run(
        [str(bindir / "bash"), str(SCRIPT)], env=env, capture_output=True, text=True, check=True
    )
    # PostgreSQL is found off PATH (Debian's /usr/lib/postgresql/<version>/bin) once installed.
    postgres = [] if list(Path("/usr/lib/postgresql").glob("*/bin/initdb")) else ["postgresql"]
    want = [
        "prometheus",
        "prometheus-alertmanager",
        "chromium",
        "victoria-metrics",
        "wrk",
        *postgres,
        "mmdebstrap",
        "umoci",
        "runc",
    ]
    assert r.stderr.strip() == "installing Debian packages: " + " ".join(want)
