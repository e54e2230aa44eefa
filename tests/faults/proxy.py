"""A TCP proxy the fault tests control: it sits between Watchtower and one dependency on 127.0.0.1.

Bytes pass through untouched (TLS included: the client still checks the dependency's own certificate), so
what changes is only how the network behaves:

- `latency(s)`: every chunk the dependency sends back is held `s` seconds first (it answers late);
- `reset()`: every open connection is cut with a TCP RST, both sides (new ones still pass);
- `blackhole(new=...)`: open connections stay open and carry nothing either way; with `new=True` new
  connections are accepted and carry nothing too, else they pass (one stuck stream, the rest fine);
- `partition()`: new connections are refused (nothing listens on the port) and open ones carry nothing, as
  when the route to the dependency is gone;
- `heal()`: all of it undone: the port listens again, held bytes flow on, latency back to 0.

It runs on its own event loop in its own thread, so a synchronous test and the service under test (in
another process or loop) both talk to it as to a real network. A connection's pumps wait on its `flowing`
event before reading and before writing, so a stalled connection neither reads nor forwards: the sender's
TCP buffers fill as they would across a dead route.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from dataclasses import dataclass, field


@dataclass(eq=False)
class _Conn:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    flowing: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


def _rst(writer: asyncio.StreamWriter | None) -> None:
    """Close with SO_LINGER 0: the kernel sends RST, as a cut connection does, instead of a polite FIN."""
    if writer is None:
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultProxy:
    def __init__(self, upstream_port: int, *, upstream_host: str = "127.0.0.1", port: int = 0) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = port  # 0: a free one, fixed at start and kept across partitions
        self.accepted = 0  # connections accepted so far (a test can tell a reconnect happened)
        self._delay = 0.0
        self._stall_new = False
        self._conns: set[_Conn] = set()
        self._server: asyncio.Server | None = None
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    # ---- lifecycle (any thread) -----------------------------------------------------------------------

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        self._call(self._listen())
        return self

    def stop(self) -> None:
        if self._thread is None:
            return

        async def close() -> None:
            await self._cut()
            await self._unlisten()

        self._call(close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._thread = None

    def upstream_ports(self) -> set[int]:
        """The local ports of the proxy's open connections to the dependency: what the dependency sees as
        its clients' ports (PostgreSQL's `pg_stat_activity.client_port`), to tell whose session is whose."""

        async def ports() -> set[int]:
            return {c.upstream.get_extra_info("sockname")[1] for c in self._conns if c.upstream is not None}

        return asyncio.run_coroutine_threadsafe(ports(), self._loop).result(10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- faults (any thread) --------------------------------------------------------------------------

    def latency(self, seconds: float) -> None:
        self._delay = seconds

    def reset(self) -> None:
        self._call(self._cut())

    def blackhole(self, *, new: bool = True) -> None:
        async def stall() -> None:
            self._stall_new = new
            for c in self._conns:
                c.flowing.clear()

        self._call(stall())

    def partition(self) -> None:
        async def cut_off() -> None:
            await self._unlisten()
            for c in self._conns:
                c.flowing.clear()

        self._call(cut_off())

    def heal(self) -> None:
        async def mend() -> None:
            self._delay, self._stall_new = 0.0, False
            if self._server is None:
                await self._listen()
            for c in self._conns:
                c.flowing.set()

        self._call(mend())

    # ---- on the proxy's loop --------------------------------------------------------------------------

    def _call(self, coro: object) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)  # type: ignore[arg-type]

    async def _cut(self) -> None:
        conns = list(self._conns)
        for c in conns:
            _rst(c.client)
            _rst(c.upstream)
            c.flowing.set()  # pumps held by a blackhole wake, find their sockets gone and end
        await asyncio.gather(*(c.task for c in conns if c.task is not None), return_exceptions=True)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port, reuse_address=True)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _unlisten(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _accept(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        conn = _Conn(c_writer, task=asyncio.current_task())
        if not self._stall_new:
            conn.flowing.set()
        self.accepted += 1
        self._conns.add(conn)
        try:
            try:
                u_reader, conn.upstream = await asyncio.open_connection(*self.upstream)
            except OSError:
                _rst(c_writer)  # the dependency itself is down: the client sees its connection cut
                return
            pumps = [
                asyncio.create_task(self._pump(conn, c_reader, conn.upstream, delayed=False)),
                asyncio.create_task(self._pump(conn, u_reader, c_writer, delayed=True)),
            ]
            try:
                # Either side closing ends the exchange; the other direction is closed with it.
                await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for p in pumps:
                    p.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
        finally:
            self._conns.discard(conn)
            for w in (c_writer, conn.upstream):
                if w is not None and not w.transport.is_closing():
                    w.close()

    async def _pump(
        self, conn: _Conn, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, delayed: bool
    ) -> None:
        with contextlib.suppress(OSError, RuntimeError):  # RuntimeError: a write to an aborted transport
            while True:
                await conn.flowing.wait()
                data = await reader.read(65536)
                if not data:
                    return
                if delayed and self._delay:
                    await asyncio.sleep(self._delay)
                await conn.flowing.wait()
                writer.write(data)
                await writer.drain()
