"""`kubectl watchtower` as a real process against a real Watchtower (the app on the demo cluster, uvicorn on
127.0.0.1) with `--server`, and through the service-proxy path: a kubeconfig whose server is a stand-in API
server on 127.0.0.1 that checks the bearer token and forwards `/api/v1/namespaces/<ns>/services/<svc>:<port>/
proxy/...` to that Watchtower (the e2e kube-apiserver refuses loopback proxy targets: docs/kubectl.md)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import yaml

from tests.fixtures.scenario import NOW, ManualClock, ReplaySource, demo_cluster, list_everything
from tests.unit.api.conftest import live_server
from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.api.app import create_app
from watchtower.bootstrap import build_container
from watchtower.config import Settings
from watchtower.domain.fairness.history import WaitEpisode
from watchtower.domain.fairness.week import IsoWeek

WEEK = IsoWeek.containing(NOW, UTC)
TOKEN = "user-token"  # noqa: S105


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    history = SQLiteFairnessHistory(tmp_path_factory.mktemp("wt") / "watchtower.db")
    start, _ = WEEK.bounds(UTC)
    history.record(
        [
            WaitEpisode(
                "wait:x", "pod", "vision", "vision", "low", "Job/x", 2, start + 60, start + 660, "scheduled"
            )
        ]
    )
    clock = ManualClock(NOW)
    source = ReplaySource(demo_cluster())
    c = build_container(
        Settings(), clock=clock, source_health=source.feed_health, source_name="replay", history=history
    )
    list_everything(c.queue_tracker, source.cluster)
    c.queue_tracker.evaluate(NOW)
    with live_server(create_app(c)) as url:
        yield url
    history.close()


def plugin(
    *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    # The module the console script `kubectl-watchtower` runs (pyproject.toml), as its own process.
    return subprocess.run(
        [sys.executable, "-m", "watchtower.commands.kubectl.app", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        input=stdin.decode() if stdin is not None else None,
    )


def ok(*args: str, **kw: object) -> str:
    r = plugin(*args, **kw)  # type: ignore[arg-type]
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_console_script_is_declared() -> None:
    import tomllib

    scripts = tomllib.loads(Path("pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-watchtower"] == "watchtower.commands.kubectl.app:main_entry"


def test_why_says_wait_tier_state_reason_position_and_estimate(server: str) -> None:
    out = ok("--server", server, "why", "detector", "-n", "vision")
    api = httpx.get(f"{server}/api/v1/workloads/vision/detector").json()["workload"]
    assert "Name:        vision/detector" in out
    assert f"Tier:        {api['tier']}" in out
    assert f"State:       {api['state']} for " in out
    assert f"Why:         {api['why']}" in out
    assert "Position:" in out and "Estimate:" in out and "Preemptions:" in out
    wide = ok("--server", server, "why", "detector", "-n", "vision", "-o", "wide")
    assert "Pods:" in wide and "Message:" in wide


def test_why_as_json_and_yaml_is_the_api_document(server: str) -> None:
    api = httpx.get(f"{server}/api/v1/workloads/vision/detector", params={"kind": "PaddleJob"}).json()
    as_json = ok("--server", server, "why", "detector", "-n", "vision", "--kind", "PaddleJob", "-o", "json")
    assert json.loads(as_json) == api
    as_yaml = ok("--server", server, "why", "detector", "-n", "vision", "-o", "yaml")
    assert yaml.safe_load(as_yaml) == api


def test_queue_is_the_waiting_work_oldest_first(server: str) -> None:
    out = ok("--server", server, "queue", "-A").splitlines()
    assert out[0].split()[:6] == ["NAMESPACE", "NAME", "KIND", "TIER", "STATE", "WAIT"]
    waiting = httpx.get(f"{server}/api/v1/queue", params={"state": "waiting"}).json()["workloads"]
    oldest_first = [w["name"] for w in sorted(waiting, key=lambda w: -w["wait_seconds"])]
    assert [line.split()[1] for line in out[1:]] == oldest_first
    vision = ok("--server", server, "queue", "-n", "vision").splitlines()[1:]
    assert vision and all(line.split()[0] == "vision" for line in vision)
    low = json.loads(ok("--server", server, "queue", "-A", "--tier", "low", "-o", "json"))
    assert low["workloads"] and {w["tier"] for w in low["workloads"]} == {"low"}
    r = plugin("--server", server, "queue", "-n", "nobody-here")
    assert r.returncode == 0 and r.stdout == "" and "No waiting workloads found" in r.stderr
    r = plugin("--server", server, "queue", "-A", "--tier", "platinum")
    assert r.returncode == 1 and r.stderr.startswith("error: unknown tier 'platinum'")


def test_teams_this_week(server: str) -> None:
    out = ok("--server", server, "teams")
    assert out.startswith(f"Week {WEEK} (UTC)")
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:]}
    assert {"vision", "language", "ops"} <= set(rows)
    assert rows["language"][-1] != "0"  # its waiting work now
    doc = yaml.safe_load(ok("--server", server, "teams", "-o", "yaml"))
    assert doc["week"] == str(WEEK)


def test_a_name_that_does_not_exist(server: str) -> None:
    r = plugin("--server", server, "why", "ghost", "-n", "vision")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith('error: workload "vision/ghost" not found')


def test_an_unknown_output_format(server: str) -> None:
    r = plugin("--server", server, "why", "detector", "-n", "vision", "-o", "xml")
    assert r.returncode == 1 and r.stderr.startswith("error: unable to match a printer")


def test_a_dead_server() -> None:
    r = plugin("--server", "http://127.0.0.1:9", "queue", "-A")
    assert r.returncode == 1 and r.stderr.startswith("error: Watchtower at http://127.0.0.1:9 did not answer")
    assert len(r.stderr.strip().splitlines()) == 1


# The service proxy, through a kubeconfig and context as kubectl reads them.


class _ApiServer(BaseHTTPRequestHandler):
    upstream = ""
    services: frozenset[str] = frozenset({"/api/v1/namespaces/watchtower/services/watchtower:8080/proxy"})

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._send(
                401, {"kind": "Status", "code": 401, "reason": "Unauthorized", "message": "Unauthorized"}
            )
        for prefix in self.services:
            if self.path.startswith(prefix + "/"):
                r = httpx.get(self.upstream + self.path[len(prefix) :])
                return self._send(r.status_code, r.json())
        return self._send(
            404,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": 'services "watchtower" not found',
                "reason": "NotFound",
                "details": {"name": "watchtower", "kind": "services"},
                "code": 404,
            },
        )

    def do_POST(self) -> None:
        # The plugin's SelfSubjectAccessReviews: this stand-in's one user may list pods everywhere.
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._send(
                401, {"kind": "Status", "code": 401, "reason": "Unauthorized", "message": "Unauthorized"}
            )
        if self.path != "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
            return self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
        return self._send(201, {"kind": "SelfSubjectAccessReview", "status": {"allowed": True}})

    def _send(self, code: int, doc: object) -> None:
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def kubeconfig(server: str, tmp_path: Path) -> Iterator[Path]:
    handler = type("H", (_ApiServer,), {"upstream": server})
    api = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    path = tmp_path / "config"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "here", "cluster": {"server": f"http://127.0.0.1:{api.server_address[1]}"}},
                    {"name": "nowhere", "cluster": {"server": "http://127.0.0.1:9"}},
                ],
                "users": [
                    {"name": "me", "user": {"token": TOKEN}},
                    {"name": "stranger", "user": {"token": "x"}},
                ],
                "contexts": [
                    {"name": "mine", "context": {"cluster": "here", "user": "me", "namespace": "vision"}},
                    {"name": "stranger", "context": {"cluster": "here", "user": "stranger"}},
                    {"name": "down", "context": {"cluster": "nowhere", "user": "me"}},
                ],
                "current-context": "mine",
            }
        )
    )
    yield path
    api.shutdown()


def test_through_the_service_proxy_with_kubeconfig_and_context(server: str, kubeconfig: Path) -> None:
    direct = ok("--server", server, "why", "detector", "-n", "vision", "-o", "json")
    assert ok("--kubeconfig", str(kubeconfig), "why", "detector", "-n", "vision", "-o", "json") == direct
    env = {"KUBECONFIG": str(kubeconfig), "PATH": "/usr/bin:/bin", "HOME": str(kubeconfig.parent)}
    assert ok("why", "detector", "-n", "vision", "-o", "json", env=env) == direct
    # Without -n, the context's namespace, as kubectl.
    assert ok("why", "detector", "-o", "json", env=env) == direct
    assert {line.split()[0] for line in ok("queue", env=env).splitlines()[1:]} == {"vision"}
    r = plugin("--context", "stranger", "queue", "-A", env=env)
    assert r.returncode == 1 and "services/proxy" in r.stderr and r.stderr.startswith("error: ")
    r = plugin("--context", "down", "queue", "-A", env=env)
    assert r.returncode == 1 and r.stderr.startswith(
        "error: the API server http://127.0.0.1:9 did not answer"
    )
    r = plugin("--context", "nope", "queue", "-A", env=env)
    assert r.returncode == 1 and "no context 'nope'" in r.stderr
    # A --kubeconfig that is not there: kubectl's words, not the service's configuration key.
    r = plugin("--kubeconfig", "/nonexistent/config", "queue", "-A")
    assert (r.returncode, r.stderr) == (1, "error: stat /nonexistent/config: no such file or directory\n")


def test_no_watchtower_installed_says_so_in_one_line(kubeconfig: Path) -> None:
    r = plugin("--kubeconfig", str(kubeconfig), "--watchtower-namespace", "elsewhere", "queue", "-A")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("error: no Watchtower in this cluster: service elsewhere/watchtower not found")
    assert len(r.stderr.strip().splitlines()) == 1


def test_local_analyses_a_dump(tmp_path: Path) -> None:
    dump = tmp_path / "objects.json"
    dump.write_bytes(demo_cluster().dump())
    out = ok("queue", "-A", "--local", "--objects", str(dump))
    assert "detector" in out.split()
    doc = json.loads(
        ok(
            "why",
            "detector",
            "-n",
            "vision",
            "--local",
            "--objects",
            "-",
            "-o",
            "json",
            stdin=dump.read_bytes(),
        )
    )
    assert doc["workload"]["name"] == "detector"
    nowhere = {"KUBECONFIG": str(tmp_path / "none"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    r = plugin("why", "ghost", "--local", "--objects", str(dump), env=nowhere)
    assert r.returncode == 1 and r.stderr.startswith('error: workload "default/ghost" not found')
    r = plugin("queue", "--local")
    assert r.returncode == 1 and "--objects" in r.stderr
