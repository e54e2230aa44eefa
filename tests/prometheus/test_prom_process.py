"""The demo's local Prometheus: the real binary, scraping the simulator's exporter and Watchtower's /metrics."""

from __future__ import annotations

import logging
import socket
import subprocess
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from tests.prometheus.prom_server import HTTPServer, SimExporter
from watchtower.adapters.metrics.registry import CONTENT_TYPE, WatchtowerMetrics
from watchtower.adapters.prometheus.process import (
    INSTALL_HINT,
    LocalPrometheusError,
    scrape_config,
    start_local_prometheus,
)
from watchtower.adapters.prometheus.reader import PrometheusReader
from watchtower.commands.demo.warm import demo_cluster
from watchtower.config.model import SimulatorConfig


def test_without_the_binary_it_returns_none_and_says_how_to_install_it(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="watchtower.adapters.prometheus.process"):
        got = start_local_prometheus(exporter_port=9, binary="prometheus-not-installed-here")
    assert got is None
    assert INSTALL_HINT in caplog.text and "install the Debian package prometheus" in caplog.text


def test_the_generated_configuration_passes_promtool(tmp_path: Path, promtool: str) -> None:
    path = tmp_path / "prometheus.yml"
    path.write_text(scrape_config(exporter="127.0.0.1:9400", watchtower="127.0.0.1:8080", scrape_interval=5))
    done = subprocess.run([promtool, "check", "config", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_it_scrapes_the_simulator_and_watchtower_then_stops_by_pid_and_cleans_up(
    real_prometheus: None,
) -> None:
    sim = demo_cluster(SimulatorConfig(seed=3, nodes=2))
    sim.step(600)
    exporter = SimExporter(sim).start()
    metrics = WatchtowerMetrics(registry=CollectorRegistry())
    own = HTTPServer({"/metrics": lambda: (200, CONTENT_TYPE, metrics.render())}).start()
    prom = start_local_prometheus(exporter_port=exporter.port, watchtower_port=own.port, scrape_interval=1)
    assert prom is not None
    reader = PrometheusReader(url=prom.url, timeout=5, retries=1, backoff=0.2)
    try:
        assert prom.url.startswith("http://127.0.0.1:")
        while True:  # bounded by pytest's timeout; the first scrapes take a scrape interval or two
            up = {s.labels["job"]: s.value for s in reader.query_sync("up")}
            if len(up) == 3 and all(v == 1 for v in up.values()):
                break
            time.sleep(0.3)
        assert set(up) == {"dcgm-exporter", "kube-state-metrics", "watchtower"}
        # honor_labels: the exporter's own namespace/pod labels name the workloads, not the scrape target
        used = reader.query_sync('DCGM_FI_DEV_GPU_UTIL{job="dcgm-exporter", pod!=""}')
        assert used and all(s.labels["namespace"].startswith("team-") for s in used)
        assert reader.query_sync('watchtower_evaluation_duration_seconds_count{job="watchtower"}')
    finally:
        reader.close()
        prom.stop()
        own.stop()
        exporter.stop()
    assert prom.process.poll() is not None
    assert not prom.workdir.exists()


def test_a_port_already_in_use_is_a_clear_error_naming_the_cause(real_prometheus: None) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(LocalPrometheusError, match="prometheus exited") as err:
            start_local_prometheus(exporter_port=9, port=port)
    assert "address already in use" in str(err.value)
