"""`Backfill` (the demo's past week into its Prometheus) with the real promtool and Prometheus: which
samples a file holds, and when `settled()` says they are blocks a restarted Prometheus answers from."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.prometheus.prom_server import PrometheusProcess
from watchtower.adapters.prometheus.backfill import Backfill

ORIGIN = 1_700_001_800.0  # half past an hour: the chunks follow the origin, not the epoch's hours
HOUR = 3600.0


def _settled_within(out: Backfill, seconds: float = 60.0) -> float:
    deadline = time.monotonic() + seconds
    while (got := out.settled()) == float("-inf") and time.monotonic() < deadline:
        time.sleep(0.05)
    return got


def _instant(url: str, query: str, at: float) -> list[dict[str, object]]:
    q = urllib.parse.urlencode({"query": query, "time": f"{at:.3f}"})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=30) as r:
        return list(json.load(r)["data"]["result"])


def test_a_files_samples_end_on_its_chunks_end_and_are_settled_once_converted(
    tmp_path: Path, real_prometheus: None
) -> None:
    data = tmp_path / "data"
    work = tmp_path / "work"
    work.mkdir()
    out = Backfill(work, keep={"m": None}, into=data, promtool="promtool", chunk=HOUR, origin=ORIGIN)
    for at, value in ((ORIGIN + 600, 1), (ORIGIN + HOUR, 2)):
        out.add(f"m {value}\n", at, job="j", instance="i")
    assert out.settled() == float("-inf")  # the first hour's file is still being written
    out.add("m 3\n", ORIGIN + HOUR + 300, job="j", instance="i")  # the next chunk: the first is handed over
    assert _settled_within(out) == ORIGIN + HOUR
    # Only the first file is blocks now: a Prometheus started on them answers a query at the chunk's end
    # with both of its samples, the one exactly on the end included, and knows nothing later.
    prom = PrometheusProcess(config="global:\n  scrape_interval: 1m\n", data_dir=data)
    prom.start()
    try:
        counted = _instant(prom.url, "count_over_time(m[1h])", ORIGIN + HOUR)
        assert [r["value"][1] for r in counted] == ["2"]  # type: ignore[index]
        assert _instant(prom.url, "count_over_time(m[250s])", ORIGIN + HOUR + 300) == []
    finally:
        prom.stop()
    blocks = out.close()
    assert (blocks.samples, blocks.files) == (3, 2)
    assert out.settled() == ORIGIN + HOUR  # close() keeps what was settled; nothing is polled any more


def test_a_failed_conversion_is_never_settled_and_close_names_it(tmp_path: Path) -> None:
    """`false` stands for a promtool that fails: the failure path needs no real conversion."""
    out = Backfill(tmp_path, keep={"m": None}, into=tmp_path / "data", promtool="false", chunk=HOUR)
    out.add("m 1\n", ORIGIN, job="j", instance="i")
    out.add("m 1\n", ORIGIN + 2 * HOUR, job="j", instance="i")
    time.sleep(0.5)  # `false` has long exited
    assert out.settled() == float("-inf")
    with pytest.raises(RuntimeError, match="promtool exited with status 1"):
        out.close()
    assert out.settled() == float("-inf")
