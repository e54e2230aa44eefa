"""Kueue's visibility API through the adapter, over real HTTP on loopback: positions read, absence and refusal
said once and looked at again later, never an error loop.

The server is a small stand-in started by the test (no Kueue controller runs in the fast tests): it answers
the discovery GET and `clusterqueues/{cq}/pendingworkloads` with the body Kueue serves (shaped from
apis/visibility/v1beta2/types.go by watchtower/simulator/forms/kueue/objects.py), or 404 / 403 on demand."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.unit.adapters.kube.fake_apiserver import write_kubeconfig
from watchtower.adapters.kube.connection import Transport, api_client
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.adapters.kube.visibility import KueueVisibility
from watchtower.simulator.forms.kueue import objects as k


class Visibility:
    def __init__(self) -> None:
        self.mode = "served"  # served | absent | forbidden
        self.versions = {"v1beta2"}
        self.queues: dict[str, Any] = {}
        self.requests: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests.append(self.path)
                code, body = outer.answer(self.path)
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def answer(self, path: str) -> tuple[int, Any]:
        if self.mode == "forbidden":
            return 403, {"kind": "Status", "code": 403, "reason": "Forbidden", "message": "no get"}
        parts = path.split("?")[0].strip("/").split("/")
        if self.mode == "absent" or len(parts) < 3 or parts[2] not in self.versions:
            return 404, {"kind": "Status", "code": 404, "reason": "NotFound", "message": "not found"}
        if len(parts) == 3:
            return 200, {"kind": "APIResourceList", "groupVersion": f"{parts[1]}/{parts[2]}"}
        cq = parts[4]
        if cq not in self.queues:
            return 404, {"kind": "Status", "code": 404, "reason": "NotFound", "message": "no such queue"}
        return 200, self.queues[cq]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"


@pytest.fixture
def server() -> Iterator[Visibility]:
    s = Visibility()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def reader(server: Visibility, tmp_path: Path) -> KueueVisibility:
    cfg = write_kubeconfig(tmp_path / "kubeconfig", server.url)
    return KueueVisibility(Transport(api_client(kubeconfig=str(cfg), context=None)), ObjectDecoder())


def test_positions_are_read_from_each_cluster_queue(server: Visibility, tmp_path: Path) -> None:
    server.queues["team-cq"] = k.pending_workloads(
        [("vision", "job-a-1", "team", 10), ("nlp", "job-b-2", "q", 5)]
    )
    got = reader(server, tmp_path).read(["team-cq", "gone-cq"])
    assert got == ({("vision", "job-a-1"): 0, ("nlp", "job-b-2"): 1}, {"team-cq"})


def test_an_older_kueue_serving_v1beta1_only_is_read_at_v1beta1(server: Visibility, tmp_path: Path) -> None:
    server.versions = {"v1beta1"}
    server.queues["team-cq"] = k.pending_workloads([("vision", "job-a-1", "team", 10)])
    v = reader(server, tmp_path)
    assert v.read(["team-cq"]) == ({("vision", "job-a-1"): 0}, {"team-cq"})
    assert v.version == "v1beta1"


@pytest.mark.parametrize(("mode", "state"), [("absent", "absent"), ("forbidden", "forbidden")])
def test_absent_or_refused_is_said_once_and_positions_stay_unknown(
    server: Visibility, tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: str, state: str
) -> None:
    server.mode = mode
    v = reader(server, tmp_path)
    with caplog.at_level(logging.WARNING):
        assert v.read(["team-cq"]) is None
        assert v.read(["team-cq"]) is None
    assert v.state == state
    assert len([r for r in caplog.records if "queue positions are unknown" in r.message]) == 1
    # Installed (or granted) later: the next look finds it.
    server.mode = "served"
    server.queues["team-cq"] = k.pending_workloads([("vision", "job-a-1", "team", 10)])
    v.version = None
    assert v.read(["team-cq"]) == ({("vision", "job-a-1"): 0}, {"team-cq"})
    assert v.state == "reachable"
