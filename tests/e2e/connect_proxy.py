"""An HTTP CONNECT proxy on a Unix socket, for kube-apiserver's egress selector: how the e2e tests put a
Watchtower listening on 127.0.0.1 behind a real Service and reach it through the real service proxy.

Why it exists: kube-apiserver refuses loopback addresses in EndpointSlices (ValidateEndpointIP,
k8s.io/kubernetes@v1.37.2 pkg/apis/core/validation) and only proxies to an endpoint whose targetRef names a Pod
holding that IP (isValidAddress, pkg/registry/core/service/storage/storage.go). The tests therefore give the
Service ordinary pod addresses (10.244.77.x) and start the API server with an EgressSelectorConfiguration whose
`cluster` egress is HTTPConnect over this socket (`egress_selector_config`): the API server dials every
service, pod and node proxy target through `CONNECT ip:port` here (cmd/kube-apiserver/app/server.go sets the
proxy transport's DialContext from the egress lookup; apiserver pkg/server/egressselector tunnelHTTPConnect),
and `routes` maps those fake addresses to the 127.0.0.1 ports the replicas really listen on. Any other
target is dialled as asked (an admission webhook or aggregated API would use the same egress).

Threads, one pair per tunnel: the tests open a few dozen tunnels at most. Nothing listens on TCP.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from collections import Counter
from pathlib import Path

import yaml

MAX_HEADER = 16 * 1024


def egress_selector_config(path: Path, socket_path: Path) -> Path:
    """Write an EgressSelectorConfiguration sending the `cluster` egress through `socket_path`; return it."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "apiserver.k8s.io/v1beta1",
                "kind": "EgressSelectorConfiguration",
                "egressSelections": [
                    {
                        "name": "cluster",
                        "connection": {
                            "proxyProtocol": "HTTPConnect",
                            "transport": {"uds": {"udsName": str(socket_path)}},
                        },
                    }
                ],
            }
        )
    )
    return path


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy src to dst until src ends, then end dst's writing side (the other direction goes on)."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


class ConnectProxy:
    """`CONNECT host:port` on a Unix socket; `routes["10.244.77.1:8080"] = 41234` sends that target to
    127.0.0.1:41234. `dialled` counts the CONNECTs per target as asked; `refused` lists those that failed."""

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self.routes: dict[str, int] = {}
        self.dialled: Counter[str] = Counter()
        self.refused: list[str] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._tunnel(self.request)

        class Server(socketserver.ThreadingUnixStreamServer):
            daemon_threads = True

        self._server = Server(str(socket_path), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="connect-proxy", daemon=True)

    def start(self) -> ConnectProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    def _tunnel(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk or len(head) > MAX_HEADER:
                return
            head += chunk
        head, _, early = head.partition(b"\r\n\r\n")
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(parts) != 3 or parts[0] != "CONNECT":
            client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return
        target = parts[1]
        host, _, port = target.rpartition(":")
        with self._lock:
            self.dialled[target] += 1
            routed = self.routes.get(target)
        where = ("127.0.0.1", routed) if routed is not None else (host.strip("[]"), int(port))
        try:
            upstream = socket.create_connection(where, timeout=10)
        except OSError as e:
            with self._lock:
                self.refused.append(f"{target}: {e}")
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        upstream.settimeout(None)
        with upstream:
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if early:
                upstream.sendall(early)
            back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
            back.start()
            _pump(client, upstream)
            back.join()
