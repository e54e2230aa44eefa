"""A small Kubernetes API server stand-in on 127.0.0.1 that speaks the list/watch protocol over real HTTP.

It serves cluster-wide collections with paged LIST (`limit`, `continue` tokens over a snapshot) and
chunked WATCH streams (ADDED/MODIFIED/DELETED/BOOKMARK lines, one HTTP chunk per event, `timeoutSeconds`),
and lets a test break things the way real clusters do: a connection cut in the middle of a line, a
garbled line, 410 Gone as an HTTP status or as an ERROR event, 500s, a missing CRD (404).

The real kube-apiserver arrives with issue 6 (tests/e2e); this server is what the adapter tests use until
then, and stays as the place where faults can be injected on demand.
"""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml


@dataclass
class _Entry:
    rv: int
    kind: str  # ADDED MODIFIED DELETED BOOKMARK | RAW (a line as is) | CUT (partial line, then close) | GONE
    payload: bytes = b""


@dataclass
class Collection:
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)  # by uid or name
    log: list[_Entry] = field(default_factory=list)
    compacted: int = 0  # a watch from a resourceVersion below this is 410 Gone
    gone_as_event: bool = False  # answer an expired watch with 200 + ERROR event instead of HTTP 410
    held: bool = False  # events are recorded but not sent to open watches (a lagging server)
    fail_next: int = 0  # answer this many requests with 500
    generation: int = 0  # bumped to close every open watch


def _key(obj: dict[str, Any]) -> str:
    m = obj["metadata"]
    return m.get("uid") or m["name"]


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def write_kubeconfig(path: Path, url: str, *, context: str = "fake", token: str = "test-token") -> Path:
    """Write a kubeconfig for the API server at `url` (a bearer token, no TLS); return its path."""
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": url}}],
        "users": [{"name": context, "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "current-context": context,
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


class FakeApiServer:
    def __init__(self, paths: list[str], *, port: int = 0) -> None:
        self.collections = {p: Collection() for p in paths}
        self.rv = 100
        self.cond = threading.Condition()
        self.requests: list[tuple[str, str, dict[str, str]]] = []  # (method, path, query)
        self.authorizations: set[str] = set()  # Authorization headers seen
        self._snapshots: dict[str, list[dict[str, Any]]] = {}
        self._snap_rv: dict[str, int] = {}
        self._stopping = False
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> FakeApiServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        with self.cond:
            self._stopping = True
            self.cond.notify_all()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def write_kubeconfig(self, path: Path, *, context: str = "fake", token: str = "test-token") -> Path:
        return write_kubeconfig(path, self.url, context=context, token=token)

    # ---- what the test does to the cluster ---------------------------------------------------------

    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def _emit(self, path: str, kind: str, payload: bytes) -> None:
        self.collections[path].log.append(_Entry(self.rv, kind, payload))
        self.cond.notify_all()

    def put(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an object: an ADDED or MODIFIED event."""
        with self.cond:
            c = self.collections[path]
            obj = json.loads(json.dumps(obj))
            obj["metadata"]["resourceVersion"] = str(self._next_rv())
            typ = "MODIFIED" if _key(obj) in c.objects else "ADDED"
            c.objects[_key(obj)] = obj
            self._emit(path, typ, json.dumps({"type": typ, "object": obj}).encode())
            return obj

    def delete(self, path: str, key: str, final: dict[str, Any] | None = None) -> None:
        """Remove an object: a DELETED event carrying its last state (or `final`)."""
        with self.cond:
            c = self.collections[path]
            obj = c.objects.pop(key)
            obj = json.loads(json.dumps(final if final is not None else obj))
            obj["metadata"]["resourceVersion"] = str(self._next_rv())
            self._emit(path, "DELETED", json.dumps({"type": "DELETED", "object": obj}).encode())

    def bookmark(self, path: str) -> int:
        """Advance the collection's resourceVersion without a change and send a BOOKMARK."""
        with self.cond:
            rv = self._next_rv()
            kind = {"/api/v1/pods": "Pod"}.get(path, "Object")
            ev = {
                "type": "BOOKMARK",
                "object": {"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}},
            }
            self._emit(path, "BOOKMARK", json.dumps(ev).encode())
            return rv

    def inject_line(self, path: str, line: bytes) -> None:
        """Send a line as is to open watches (garbage, an unknown event type...)."""
        with self.cond:
            self._emit(path, "RAW", line)

    def cut(self, path: str, partial: bytes = b'{"type":"MODIFIED","object":{"kind":"Po') -> None:
        """Send part of a line, then drop the connection of every open watch without ending the body."""
        with self.cond:
            self._emit(path, "CUT", partial)

    def expire(self, path: str, *, as_event: bool = False) -> None:
        """Forget the history: watches from older versions get 410 Gone; open watches are told so."""
        with self.cond:
            c = self.collections[path]
            c.compacted = self.rv + 1
            c.gone_as_event = as_event
            c.held = False
            self._emit(path, "GONE", b"")

    def hold(self, path: str, held: bool = True) -> None:
        with self.cond:
            self.collections[path].held = held
            self.cond.notify_all()

    def fail(self, path: str, times: int) -> None:
        with self.cond:
            self.collections[path].fail_next = times

    def close_watches(self, path: str) -> None:
        """End every open watch cleanly, as the server does at `timeoutSeconds`."""
        with self.cond:
            self.collections[path].generation += 1
            self.cond.notify_all()

    def truth(self, path: str) -> dict[str, dict[str, Any]]:
        with self.cond:
            return json.loads(json.dumps(self.collections[path].objects))

    def watch_versions(self, path: str) -> list[str]:
        """The resourceVersion each watch request on `path` started from, in order."""
        return [
            q.get("resourceVersion", "")
            for m, p, q in self.requests
            if p == path and q.get("watch") == "true"
        ]

    # ---- HTTP ---------------------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _json(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                u = urlsplit(self.path)
                q = {k: v[-1] for k, v in parse_qs(u.query).items()}
                with server.cond:
                    server.requests.append(("GET", u.path, q))
                    server.authorizations.add(self.headers.get("Authorization", ""))
                    c = server.collections.get(u.path)
                    if c is None:
                        self._json(
                            404, _status(404, "NotFound", "the server could not find the requested resource")
                        )
                        return
                    if c.fail_next > 0:
                        c.fail_next -= 1
                        self._json(500, _status(500, "InternalError", "etcdserver: request timed out"))
                        return
                if q.get("watch") == "true":
                    self._watch(u.path, c, q)
                else:
                    self._list(u.path, c, q)

            def _list(self, path: str, c: Collection, q: dict[str, str]) -> None:
                limit = int(q.get("limit", "0") or 0)
                token = q.get("continue", "")
                with server.cond:
                    if token:
                        snap_id, _, offset_s = token.partition(":")
                        if snap_id not in server._snapshots:
                            self._json(
                                410, _status(410, "Expired", "The provided continue parameter is too old")
                            )
                            return
                        items, rv, offset = (
                            server._snapshots[snap_id],
                            server._snap_rv[snap_id],
                            int(offset_s),
                        )
                    else:
                        items = [json.loads(json.dumps(o)) for o in c.objects.values()]
                        rv, offset = server.rv, 0
                        snap_id = f"s{len(server._snapshots)}"
                        server._snapshots[snap_id], server._snap_rv[snap_id] = items, rv
                end = offset + limit if limit else len(items)
                meta: dict[str, Any] = {"resourceVersion": str(rv)}
                if end < len(items):
                    meta["continue"] = f"{snap_id}:{end}"
                self._json(
                    200, {"kind": "List", "apiVersion": "v1", "metadata": meta, "items": items[offset:end]}
                )

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def _watch(self, path: str, c: Collection, q: dict[str, str]) -> None:
                since = int(q.get("resourceVersion") or 0)
                timeout = float(q.get("timeoutSeconds") or 300)
                with server.cond:
                    gone = since < c.compacted
                    if gone and not c.gone_as_event:
                        self._json(
                            410, _status(410, "Expired", f"too old resource version: {since} ({c.compacted})")
                        )
                        return
                    idx = next(
                        (i for i, e in enumerate(c.log) if e.rv > since and e.kind != "GONE"), len(c.log)
                    )
                    gen = c.generation
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                if gone:
                    err = _status(410, "Expired", f"too old resource version: {since}")
                    self._chunk(json.dumps({"type": "ERROR", "object": err}).encode() + b"\n")
                    self._chunk(b"")
                    return
                deadline = threading.Event()
                timer = threading.Timer(timeout, lambda: (deadline.set(), server.close_watches_notify()))
                timer.daemon = True
                timer.start()
                try:
                    while True:
                        with server.cond:
                            while (
                                (idx >= len(c.log) or c.held)
                                and gen == c.generation
                                and not deadline.is_set()
                                and not server._stopping
                            ):
                                server.cond.wait()
                            if gen != c.generation or deadline.is_set() or server._stopping:
                                batch = None
                            else:
                                batch = c.log[idx:]
                                idx = len(c.log)
                        if batch is None:
                            self._chunk(b"")
                            return
                        for e in batch:
                            if e.kind == "CUT":
                                self._chunk(e.payload)
                                self.connection.shutdown(socket.SHUT_RDWR)
                                self.close_connection = True
                                return
                            if e.kind == "GONE":
                                err = _status(410, "Expired", "too old resource version")
                                self._chunk(json.dumps({"type": "ERROR", "object": err}).encode() + b"\n")
                                self._chunk(b"")
                                return
                            self._chunk(e.payload + b"\n")
                except (BrokenPipeError, ConnectionResetError, OSError):
                    self.close_connection = True
                finally:
                    timer.cancel()

        return Handler

    def close_watches_notify(self) -> None:
        with self.cond:
            self.cond.notify_all()
