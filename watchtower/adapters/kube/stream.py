"""Reading a blocking HTTP body on a thread and handing the bytes to the event loop in batches.

One read per HTTP chunk is what the client gives; the API server sends one chunk per watch event, so a
thread hop per chunk would cost more than decoding. The pump thread reads ahead and the loop takes
everything that has arrived at once. A cap on buffered bytes makes the thread wait for the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque

import urllib3


class StreamPump:
    def __init__(
        self, resp: urllib3.BaseHTTPResponse, *, read_size: int = 256 * 1024, high_water: int = 8 << 20
    ):
        self._resp = resp
        self._read_size = read_size
        self._high = high_water
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._lock = threading.Lock()
        self._room = threading.Event()
        self._room.set()
        self._eof = False
        self._error: BaseException | None = None
        self._stopped = False
        self._loop = asyncio.get_running_loop()
        self._ready = asyncio.Event()
        self._thread = threading.Thread(target=self._pump, name="watch-reader", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        try:
            while not self._stopped:
                data = self._resp.read1(self._read_size)
                if not data:
                    break
                with self._lock:
                    wake = not self._chunks
                    self._chunks.append(data)
                    self._buffered += len(data)
                    if self._buffered > self._high:
                        self._room.clear()
                if wake:
                    self._wake()
                self._room.wait()
        except BaseException as e:  # handed to the loop, which decides what it means
            self._error = e
        finally:
            with self._lock:
                self._eof = True
            self._wake()

    def _wake(self) -> None:
        # RuntimeError: the loop is closed, nobody is listening any more.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._ready.set)

    async def chunks(self) -> list[bytes]:
        """Return every chunk that has arrived, waiting for at least one; [] at the end of the body.

        Raises what the read raised (connection reset, read timeout, truncated chunked body).
        """
        while True:
            with self._lock:
                if self._chunks:
                    out = list(self._chunks)
                    self._chunks.clear()
                    self._buffered = 0
                    self._room.set()
                    return out
                self._ready.clear()
                eof = self._eof
            if eof:
                if self._error is not None and not self._stopped:
                    raise self._error
                return []
            await self._ready.wait()

    def close(self) -> None:
        """Stop reading: shut the socket so a blocked read returns, then release it (not reused)."""
        self._stopped = True
        self._room.set()
        # Already closed or never connected: nothing to stop.
        with contextlib.suppress(Exception):
            self._resp.shutdown()
        with contextlib.suppress(Exception):
            self._resp.close()
