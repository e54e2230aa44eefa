"""`watchtower run` follows its mounted ConfigMap: the real command line on the simulator, its configuration in
a directory laid out and updated as the kubelet does (`..data` swapped onto a new timestamped directory),
`/metrics` read over HTTP. A bad file is refused and said so; the next good one is taken."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from tests.fixtures.configmap import ConfigMapMount

CLI = [sys.executable, "-m", "watchtower.cli"]


def doc(tmp_path, *, receiver: str = "default") -> dict:
    return {
        "cluster": {"source": "sim"},
        "server": {"config_reload_every": "200ms"},
        "store": {"path": str(tmp_path / "alerts.db")},
        "alerting": {"route": {"receiver": receiver}, "receivers": [{"name": "default"}]},
    }


def metric(url: str, name: str) -> str:
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith(name):
            return line
    return ""


def wait_for(check, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.fixture
def service(tmp_path):
    mount = ConfigMapMount(tmp_path / "config")
    mount.root.mkdir()
    mount.publish(doc(tmp_path))
    p = subprocess.Popen(
        [*CLI, "run", "--config", str(mount.path), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ},
    )
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert "serving at " in line, (line, p.poll())
        yield mount, line.split("serving at ", 1)[1].strip().rstrip("/"), p
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def test_a_bad_configmap_is_refused_while_running_and_the_next_good_one_taken(service, tmp_path):
    mount, url, p = service
    assert metric(url, "watchtower_config_valid ") == "watchtower_config_valid 1.0"

    mount.publish(doc(tmp_path, receiver="x"))
    wait_for(
        lambda: metric(url, "watchtower_config_valid ") == "watchtower_config_valid 0.0", "never refused"
    )
    assert metric(url, 'watchtower_config_reload_total{result="invalid"}').endswith(" 1.0")
    assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200  # still serving, on the old one

    mount.publish(doc(tmp_path))
    wait_for(lambda: metric(url, "watchtower_config_valid ") == "watchtower_config_valid 1.0", "never taken")
    assert metric(url, 'watchtower_config_reload_total{result="applied"}').endswith(" 1.0")
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert "changed and cannot be used; the running configuration stays: alerting.route.receiver: 'x'" in err
