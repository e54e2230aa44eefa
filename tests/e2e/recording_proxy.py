"""A TLS relay in front of the API server that records the method and target of every request through it.

A process pointed at the relay (its kubeconfig names the relay's URL) talks to the real API server through
it, byte for byte; the relay reads the request heads as they pass, so a test can say exactly which calls the
process made (for Watchtower: GETs only, never a write). It serves with the API server's own certificate,
so the client trusts it through the same CA. HTTP/1.1 only (ALPN), which is what the official Python
client speaks. Listens on 127.0.0.1, on a free port, in its own thread with its own event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path

MAX_HEAD = 64 * 1024


@dataclass(frozen=True)
class Request:
    method: str
    target: str  # path and query, as sent

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]


class HeadReader:
    """Splits a client's byte stream into request heads, skipping bodies by their Content-Length."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._body_left = 0
        self.lost = ""  # why the stream could no longer be followed; "" while it can

    def feed(self, data: bytes) -> list[Request]:
        out: list[Request] = []
        if self.lost:
            return out
        self._buf += data
        while True:
            if self._body_left:
                n = min(self._body_left, len(self._buf))
                del self._buf[:n]
                self._body_left -= n
                if self._body_left:
                    return out
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > MAX_HEAD:
                    self.lost = "request head larger than 64 KiB"
                return out
            head = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
            del self._buf[: end + 4]
            method, _, rest = head[0].partition(" ")
            out.append(Request(method, rest.rpartition(" ")[0] or rest))
            headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])}
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self.lost = f"chunked request body after {method} {rest}"
                return out
            try:
                self._body_left = int(headers.get("content-length", "0"))
            except ValueError:
                self.lost = f"unreadable Content-Length after {method} {rest}"
                return out


@dataclass
class RecordingProxy:
    upstream_port: int
    ca: Path
    cert: Path
    key: Path
    requests: list[Request] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # streams the relay could not follow
    port: int = 0
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    _thread: threading.Thread | None = None
    _server: asyncio.Server | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _conns: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def recorded(self) -> list[Request]:
        with self._lock:
            return list(self.requests)

    def start(self) -> RecordingProxy:
        self._thread = threading.Thread(target=self._loop.run_forever, name="recording-proxy", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for t in list(self._conns):
                t.cancel()
            await asyncio.gather(*self._conns, return_exceptions=True)

        if self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._thread = None

    async def _listen(self) -> None:
        serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        serving.load_cert_chain(str(self.cert), str(self.key))
        serving.set_alpn_protocols(["http/1.1"])
        self._upstream_tls = ssl.create_default_context(cafile=str(self.ca))
        self._upstream_tls.set_alpn_protocols(["http/1.1"])
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0, ssl=serving)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _relay(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        u_writer: asyncio.StreamWriter | None = None
        try:
            u_reader, u_writer = await asyncio.open_connection(
                "127.0.0.1", self.upstream_port, ssl=self._upstream_tls, server_hostname="127.0.0.1"
            )
            heads = HeadReader()

            async def upstream() -> None:
                while data := await c_reader.read(65536):
                    got = heads.feed(data)
                    if got:
                        with self._lock:
                            self.requests.extend(got)
                    if heads.lost and heads.lost not in self.problems:
                        self.problems.append(heads.lost)
                    assert u_writer is not None
                    u_writer.write(data)
                    await u_writer.drain()

            async def downstream() -> None:
                while data := await u_reader.read(65536):
                    c_writer.write(data)
                    await c_writer.drain()

            # Either side closing ends the exchange; the other direction is cut with it.
            pumps = [asyncio.create_task(upstream()), asyncio.create_task(downstream())]
            try:
                await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for p in pumps:
                    p.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
        except (OSError, ssl.SSLError):
            pass  # a peer went away mid-stream: the client sees a closed connection, as it would anyway
        finally:
            for w in (c_writer, u_writer):
                if w is not None:
                    w.close()
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(w.wait_closed(), 2)
            self._conns.discard(task)
