"""How many access reviews `kubectl watchtower` sends through a real ServiceProxy, and what it does with the
answers. The API server is a stand-in on 127.0.0.1 answering SelfSubjectAccessReviews from a table: the real
one is exercised in tests/e2e/test_kubectl_proxy.py, where a hundred namespaces would cost minutes."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from watchtower.adapters.kube.service_proxy import ServiceProxy
from watchtower.commands.kubectl import reach
from watchtower.commands.kubectl.reach import PluginError, Proxied

TOKEN = "alice-token"  # noqa: S105


class _Reviews(BaseHTTPRequestHandler):
    allowed: frozenset[str] = frozenset({"vision"})
    asked: list[str]

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._send(
                401, {"kind": "Status", "code": 401, "reason": "Unauthorized", "message": "Unauthorized"}
            )
        ns = review["spec"]["resourceAttributes"]["namespace"]
        self.asked.append(ns)
        return self._send(201, {"kind": "SelfSubjectAccessReview", "status": {"allowed": ns in self.allowed}})

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
def api() -> Iterator[tuple[str, list[str], type[_Reviews]]]:
    """Yield the stand-in's URL, the namespaces it was asked about in order, and its handler (to set `allowed`)."""
    asked: list[str] = []
    handler = type("H", (_Reviews,), {"asked": asked})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", asked, handler
    server.shutdown()
    server.server_close()


def proxied(url: str, tmp_path: Path, token: str = TOKEN) -> Proxied:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    (tmp_path / "config").write_text(yaml.safe_dump(config))
    return Proxied(
        ServiceProxy.connect(
            kubeconfig=str(tmp_path / "config"),
            context=None,
            namespace="watchtower",
            service="watchtower",
            port="8080",
        )
    )


def test_each_namespace_is_reviewed_once_and_at_most_max_reviews_of_them(
    api: tuple[str, list[str], type[_Reviews]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, asked, _ = api
    monkeypatch.setattr(reach, "MAX_REVIEWS", 3)
    p = proxied(url, tmp_path)
    shown = [ns for ns in ["vision", "nlp", "vision", "ops", "a", "b", "nlp"] if p.may_read(ns)]
    assert shown == ["vision", "vision"]
    # Every namespace first (denied), then vision, nlp and ops; a and b are left unchecked and not shown.
    assert asked == ["", "vision", "nlp", "ops"]
    assert p.unchecked() == 2


def test_a_user_who_may_list_pods_everywhere_costs_one_review(
    api: tuple[str, list[str], type[_Reviews]], tmp_path: Path
) -> None:
    url, asked, handler = api
    handler.allowed = frozenset({""})
    p = proxied(url, tmp_path)
    assert all(p.may_read(f"ns-{i}") for i in range(100))
    assert asked == [""] and p.unchecked() == 0


def test_an_unknown_user_is_told_as_kubectl_tells_it(
    api: tuple[str, list[str], type[_Reviews]], tmp_path: Path
) -> None:
    url, _, _ = api
    with pytest.raises(PluginError, match=r"^You must be logged in to the server \(Unauthorized\)$"):
        proxied(url, tmp_path, token="wrong").may_read("vision")
