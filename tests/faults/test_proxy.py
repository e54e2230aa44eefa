"""The fault proxy itself, in front of a real TCP echo server on 127.0.0.1: each fault does what the fault
tests rely on, and heal() undoes it."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from tests.faults.proxy import FaultProxy


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        with contextlib.suppress(ConnectionResetError):  # the proxy's reset reaches this side too
            while data := self.request.recv(65536):
                self.request.sendall(data)


class _EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    server = _EchoServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    p = FaultProxy(server.server_address[1]).start()
    try:
        yield p
    finally:
        p.stop()
        server.shutdown()
        server.server_close()


def _connect(p: FaultProxy, timeout: float = 2.0) -> socket.socket:
    return socket.create_connection(p.address, timeout=timeout)


def _echo(s: socket.socket, data: bytes) -> bytes:
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def test_bytes_pass_through_untouched(proxy: FaultProxy) -> None:
    payload = bytes(range(256)) * 1000
    with _connect(proxy) as s:
        assert _echo(s, payload) == payload


def test_latency_holds_every_answer(proxy: FaultProxy) -> None:
    proxy.latency(0.5)
    with _connect(proxy) as s:
        t0 = time.monotonic()
        assert _echo(s, b"ping") == b"ping"
        assert time.monotonic() - t0 >= 0.5
    proxy.heal()
    with _connect(proxy) as s:
        t0 = time.monotonic()
        assert _echo(s, b"ping") == b"ping"
        assert time.monotonic() - t0 < 0.4


def test_reset_cuts_open_connections_and_lets_new_ones_through(proxy: FaultProxy) -> None:
    with _connect(proxy) as s:
        assert _echo(s, b"a") == b"a"
        proxy.reset()
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            # A reset socket fails its next read (or write) instead of waiting.
            s.sendall(b"b")
            if not s.recv(1):
                raise ConnectionResetError("closed")
    with _connect(proxy) as s:
        assert _echo(s, b"c") == b"c"


def test_blackhole_keeps_the_connection_open_carrying_nothing_until_healed(proxy: FaultProxy) -> None:
    with _connect(proxy, timeout=0.5) as stuck:
        assert _echo(stuck, b"1") == b"1"
        proxy.blackhole(new=False)
        stuck.sendall(b"held")
        with pytest.raises(TimeoutError):
            stuck.recv(16)
        # Open, not closed: a second send is taken without error, and still nothing comes back.
        stuck.sendall(b"!")
        with pytest.raises(TimeoutError):
            stuck.recv(16)
        with _connect(proxy) as fresh:  # new=False: only the open connections are stuck
            assert _echo(fresh, b"fresh") == b"fresh"
        proxy.heal()
        stuck.settimeout(2)
        got = b""
        while len(got) < 5:
            got += stuck.recv(16)
        assert got == b"held!", "what was held flows on once healed"


def test_blackhole_of_new_connections_accepts_them_and_answers_nothing(proxy: FaultProxy) -> None:
    proxy.blackhole()
    with _connect(proxy, timeout=0.5) as s:  # the connect succeeds
        s.sendall(b"x")
        with pytest.raises(TimeoutError):
            s.recv(1)


def test_partition_refuses_new_connections_and_stalls_open_ones_then_heals_on_the_same_port(
    proxy: FaultProxy,
) -> None:
    port = proxy.port
    with _connect(proxy, timeout=0.5) as s:
        assert _echo(s, b"1") == b"1"
        proxy.partition()
        with pytest.raises(ConnectionRefusedError):
            _connect(proxy)
        s.sendall(b"2")
        with pytest.raises(TimeoutError):
            s.recv(1)
        proxy.heal()
        assert proxy.port == port
        s.settimeout(2)
        assert s.recv(1) == b"2"
    with _connect(proxy) as s:
        assert _echo(s, b"3") == b"3"
