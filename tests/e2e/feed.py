"""The running service's Kubernetes feed, as the service wires it: `KubeSource` → `Ingestor` → `ClusterState`,
on its own event loop in a background thread, with a record of every happening and a gate that can hold
the feed still (a slow consumer) while the test changes the cluster behind its back."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from watchtower.adapters.kube import KubeSource
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.domain.state import ClusterState, Happening
from watchtower.services.ingest import Ingestor

T = TypeVar("T")


class Feed:
    def __init__(self, kubeconfig: Path, **options: Any) -> None:
        self.state = ClusterState()
        decoder = ObjectDecoder()
        self.ingestor = Ingestor(self.state, decoder)
        self.source = KubeSource.connect(kubeconfig=str(kubeconfig), context=None, decoder=decoder, **options)
        self.happenings: list[Happening] = []
        self.lists: list[str] = []
        self.lock = threading.Lock()
        self.gate = threading.Event()
        self.gate.set()
        self.held = threading.Event()  # set while a sink waits at the closed gate
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="feed", daemon=True)
        self._task: Future[None] | None = None
        self._inner: asyncio.Task[None] | None = None

    def _wait_gate(self) -> None:
        if not self.gate.is_set():
            self.held.set()
            self.gate.wait()
            self.held.clear()

    def on_list(
        self, kind: str, items: Sequence[msgspec.Raw], *, first: bool = True, last: bool = True
    ) -> None:
        self._wait_gate()
        with self.lock:
            if last:  # one entry per complete LIST, however many pages it came in
                self.lists.append(kind)
            self.happenings.extend(self.ingestor.list_page(kind, items, first=first, last=last))

    def on_change(self, kind: str, event_type: str, raw: msgspec.Raw | bytes) -> None:
        self._wait_gate()
        with self.lock:
            self.happenings.extend(self.ingestor.apply(kind, event_type, raw))

    def start(self) -> None:
        self._thread.start()
        self._task = asyncio.run_coroutine_threadsafe(self._run(), self._loop)

    async def _run(self) -> None:
        self._inner = asyncio.current_task()
        await self.source.run(on_list=self.on_list, on_change=self.on_change)

    async def _cancel(self) -> None:
        if self._inner is not None:
            self._inner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._inner

    def stop(self) -> None:
        self.gate.set()
        if self._task is not None:
            # Cancel from inside the loop and wait, so the source's task group unwinds before the loop stops.
            asyncio.run_coroutine_threadsafe(self._cancel(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def read(self, fn: Callable[[ClusterState], T]) -> T:
        with self.lock:
            return fn(self.state)

    def failure(self) -> BaseException | None:
        """Return what ended the source's run, if it ended (it must not, until stopped)."""
        t = self._task
        if t is None or not t.done() or t.cancelled():
            return None
        return t.exception()
