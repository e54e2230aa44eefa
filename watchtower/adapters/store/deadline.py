"""A bound on each call to a database over one connection: past it, the connection is cut.

psycopg runs a statement by waiting on the connection's socket with no end: a connection that stays open and
carries nothing (a middlebox that holds the bytes, a peer gone behind something still answering TCP) holds
the caller for as long as the kernel keeps the socket, hours. TCP keepalives do not help when something on
the way still acknowledges. So a thread of the store's own watches the call under way and, past its
deadline, shuts the socket down: libpq reads the end of the stream and the call fails as on a connection
the server dropped, down the paths that already handle that (the start's retry, the delivery's failure).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator


class Deadline:
    """Watch one call at a time (the store's lock serialises them); `fired` says the last one was cut."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._armed: tuple[float, socket.socket] | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self.fired = False

    @contextlib.contextmanager
    def bound(self, fileno: int, seconds: float) -> Iterator[None]:
        """Cut the connection on `fileno` if the block runs past `seconds`. A bound inside another is the
        outer one's (a store call inside a store call's transaction)."""
        if self._armed is not None:
            yield
            return
        # A duplicate of the descriptor: the socket cannot be closed and its number reused under the
        # watcher's feet; shutting the duplicate down ends the connection for every descriptor of it.
        sock = socket.socket(fileno=os.dup(fileno))
        with self._cond:
            self.fired = False
            self._armed = (time.monotonic() + seconds, sock)
            if self._thread is None:  # the first call, or the first since close()
                self._closed = False
                self._thread = threading.Thread(target=self._watch, name="store-deadline", daemon=True)
                self._thread.start()
            self._cond.notify()
        try:
            yield
        finally:
            with self._cond:
                self._armed = None
                self._cond.notify()
            sock.close()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)

    def _watch(self) -> None:
        with self._cond:
            while not self._closed:
                if self._armed is None:
                    self._cond.wait()
                    continue
                deadline, sock = self._armed
                left = deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                # Said before the cut: the call wakes at the cut and asks at once whether it was one.
                self.fired = True
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                self._armed = None
