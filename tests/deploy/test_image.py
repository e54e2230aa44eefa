"""The image a cluster admin deploys: built from Debian packages and the project's wheels (deploy/image/build.sh),
run by a real container runtime (runc) when one works here, else its root filesystem in a chroot (see
tests/deploy/image.py for which works on this machine and why). The Dockerfile is checked for what it
promises; it is not built here: no Docker daemon runs on this machine and no base image can be pulled."""

from __future__ import annotations

import os
import re
import signal
import socket
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.deploy.image import ROOT, Runner, Unpacked, build, image_config, runtime, unpack, version

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="building and running the image needs root (mmdebstrap, umoci, runc)"
)


@pytest.fixture(scope="module")
def layout() -> Path:
    return build() / "oci"


@pytest.fixture(scope="module")
def unpacked(layout: Path, tmp_path_factory: pytest.TempPathFactory) -> Unpacked:
    return unpack(layout, version(), tmp_path_factory.mktemp("image") / "bundle")


@pytest.fixture(scope="module")
def how(unpacked: Unpacked, tmp_path_factory: pytest.TempPathFactory) -> str:
    got = runtime(unpacked, tmp_path_factory.mktemp("probe"))
    print(f"\nthe image runs under: {got}")
    return got


def test_the_image_runs_watchtower_as_user_65532_with_its_version(
    unpacked: Unpacked, how: str, tmp_path: Path
) -> None:
    r = Runner(unpacked, tmp_path, how).run(["/usr/local/bin/watchtower", "--version"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"watchtower {version()}"
    ids = Runner(unpacked, tmp_path, how).run(["/usr/bin/id"])
    assert ids.stdout.startswith("uid=65532(nonroot) gid=65532(nonroot)"), ids.stdout + ids.stderr


def test_the_image_says_what_a_deployment_needs(layout: Path) -> None:
    cfg = image_config(layout, version())["config"]
    assert cfg["User"] == "65532:65532"
    assert cfg["Entrypoint"] == ["/usr/local/bin/watchtower"]
    # deploy/ mounts the ConfigMap at /etc/watchtower and passes the same arguments.
    assert cfg["Cmd"] == ["run", "--config", "/etc/watchtower/config.yaml"]
    assert "8080/tcp" in cfg["ExposedPorts"]


def test_no_compiler_pip_or_package_lists_in_the_image(unpacked: Unpacked, how: str, tmp_path: Path) -> None:
    fs = unpacked.rootfs
    for tool in ("gcc", "cc", "make", "pip", "pip3", "g++"):
        assert not (fs / "usr" / "bin" / tool).exists(), tool
    assert not list((fs / "var" / "lib" / "apt" / "lists").glob("*_Packages"))
    r = Runner(unpacked, tmp_path, how).run(["/opt/watchtower/bin/python", "-c", "import pip"])
    assert r.returncode != 0 and "No module named 'pip'" in r.stderr


def _config(dir_: Path, *, port: int, bad: bool = False) -> Path:
    dir_.mkdir(exist_ok=True)
    doc = {
        "cluster": {"source": "sim"},
        "simulator": {"nodes": 2, "gpus_per_node": 4, "speed": 60},
        "server": {"host": "127.0.0.1", "port": port},
        "store": {"path": "/var/lib/watchtower/watchtower.db"},
    }
    if bad:
        doc["tiers"] = [{"name": "Medium", "min_priority": 1, "warn_after": "1h", "critical_after": "30m"}]
    (dir_ / "config.yaml").write_text(yaml.safe_dump(doc))
    return dir_


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_check_config_in_the_image_accepts_a_good_file_and_names_the_bad_key(
    unpacked: Unpacked, how: str, tmp_path: Path
) -> None:
    good = Runner(unpacked, tmp_path, how, config_dir=_config(tmp_path / "good", port=8080))
    r = good.run(["/usr/local/bin/watchtower", "check-config", "/etc/watchtower/config.yaml"])
    assert r.returncode == 0, r.stdout + r.stderr
    bad = Runner(unpacked, tmp_path, how, config_dir=_config(tmp_path / "bad", port=8080, bad=True))
    r = bad.run(["/usr/local/bin/watchtower", "check-config", "/etc/watchtower/config.yaml"])
    assert r.returncode != 0
    assert "tiers" in (r.stdout + r.stderr)


def test_the_service_in_the_image_serves_healthz_and_stops_on_sigterm(
    unpacked: Unpacked, how: str, tmp_path: Path
) -> None:
    port = _free_port()
    runner = Runner(unpacked, tmp_path, how, config_dir=_config(tmp_path / "cfg", port=port))
    p = runner.popen(["/usr/local/bin/watchtower", "run", "--config", "/etc/watchtower/config.yaml"])
    try:
        deadline, got = time.monotonic() + 90, None
        while time.monotonic() < deadline and p.poll() is None:
            try:
                got = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.5)
        assert got is not None, (
            f"no answer on /healthz; exit {p.poll()}: {p.stderr.read() if p.poll() is not None and p.stderr else ''}"
        )
        assert got.status_code == 200
        # The read-only root held: the store went to the volume, nothing was written beside the code.
        assert not list((unpacked.rootfs / "opt" / "watchtower").rglob("*.db"))
        p.send_signal(signal.SIGTERM)
        # Kubernetes gives 30 s before SIGKILL; the service's own deadline for sends is 20 s.
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)
        runner.cleanup()


def test_the_dockerfile_pins_its_base_and_keeps_build_tools_out_of_the_final_stage() -> None:
    text = (ROOT / "deploy" / "image" / "Dockerfile").read_text()
    base = re.search(r"^ARG BASE=(\S+)$", text, re.M)
    assert base and re.fullmatch(r"[a-z0-9./-]+:[\w.-]+@sha256:[0-9a-f]{64}", base.group(1))
    stages = re.split(r"^FROM ", text, flags=re.M)[1:]
    assert len(stages) == 2 and all(s.startswith("${BASE}") for s in stages)
    final = stages[-1]
    assert "pip install" not in final
    assert not re.search(r"python3-(pip|venv)|build-essential|gcc", final)
    assert re.search(r"^USER 65532:65532$", final, re.M)
    assert 'ENTRYPOINT ["/usr/local/bin/watchtower"]' in final
    assert f"org.opencontainers.image.version={version()}" in final
