"""Kueue's visibility API: the pending Workloads of each ClusterQueue in Kueue's order, on a slow cadence.

`/apis/visibility.kueue.x-k8s.io/{v1beta2,v1beta1}/clusterqueues/{cq}/pendingworkloads` is an aggregated
API served by Kueue's controller (sigs.k8s.io/kueue pkg/visibility, apis/visibility/v1beta2/types.go
PendingWorkloadsSummary). It is often not installed (the VisibilityOnDemand gate, an APIService) or not
granted: an absent group (404) or a refusal (403) is said once and looked at again every
`absent_recheck`, never an error loop; positions are then unknown (null), not guessed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from watchtower.adapters.clock import SystemClock
from watchtower.ports import Clock

from .backoff import Backoff
from .connection import ApiStatus, Transport
from .decoder import DecodeError, ObjectDecoder

log = logging.getLogger(__name__)

GROUP = "visibility.kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")

Positions = dict[tuple[str, str], int]
PositionSink = Callable[[Positions, set[str]], None]


class KueueVisibility:
    """Reads queue positions for the ClusterQueues that have Workloads waiting, and hands them on."""

    def __init__(
        self,
        transport: Transport,
        decoder: ObjectDecoder,
        *,
        every: float = 30.0,
        absent_recheck: float = 600.0,
        timeout: float = 10.0,
        clock: Clock | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.transport = transport
        self.decoder = decoder
        self.every = every
        self.absent_recheck = absent_recheck
        self.timeout = timeout
        self.clock = clock or SystemClock()
        self._backoff = backoff or Backoff(base=every, cap=absent_recheck)
        self.version: str | None = None  # the version served, once found
        self.state = "unknown"  # reachable, absent, forbidden, failing
        self.last_error = ""

    def _get(self, path: str) -> bytes:
        resp = self.transport.get(path, [], timeout=(self.timeout, self.timeout))
        try:
            return resp.read()
        finally:
            resp.release_conn()

    def _find_version(self) -> str | None:
        """Return the first version the API server serves the group at; None when it serves neither."""
        for v in VERSIONS:
            try:
                self._get(f"/apis/{GROUP}/{v}")
            except ApiStatus as e:
                if e.code == 404:
                    continue
                raise
            return v
        return None

    def read(self, queues: Iterable[str]) -> tuple[Positions, set[str]] | None:
        """Return the positions in these ClusterQueues and the queues read; None when the API is absent or
        refused (the state says which). Raises for other failures (the caller backs off)."""
        if self.version is None:
            try:
                self.version = self._find_version()
            except ApiStatus as e:
                if e.code != 403:
                    raise
                self._became("forbidden", f"reading {GROUP} is forbidden: {e.message[:200]}")
                return None
            if self.version is None:
                self._became("absent", f"{GROUP} is not served (no Kueue visibility API)")
                return None
        out: Positions = {}
        read: set[str] = set()
        for cq in sorted(set(queues)):
            try:
                body = self._get(f"/apis/{GROUP}/{self.version}/clusterqueues/{cq}/pendingworkloads")
            except ApiStatus as e:
                if e.code == 403:
                    self._became("forbidden", f"reading {GROUP} is forbidden: {e.message[:200]}")
                    return None
                if e.code == 404:  # the ClusterQueue went away between the watch and this read
                    continue
                raise
            try:
                out.update(self.decoder.pending_positions(body))
            except DecodeError as e:
                log.warning("Kueue visibility API: unreadable pendingworkloads of %s: %s", cq, e)
                continue
            read.add(cq)
        self._became("reachable", "")
        return out, read

    def _became(self, state: str, why: str) -> None:
        if state != self.state:
            if state == "reachable":
                log.info("Kueue visibility API (%s) reachable: queue positions are read", self.version)
            else:
                log.warning(
                    "%s; queue positions are unknown, looked at again every %.0fs", why, self.absent_recheck
                )
        self.state, self.last_error = state, why

    async def run(self, *, queues: Callable[[], Iterable[str]], on_positions: PositionSink) -> None:
        """Read positions every `every` seconds until cancelled."""
        while True:
            wanted = list(queues())
            delay = self.every
            if wanted:
                try:
                    got = await asyncio.to_thread(self.read, wanted)
                except Exception as e:  # connection loss, 5xx: back off, say it once
                    delay = self._backoff.next()
                    if self.state != "failing":
                        log.warning("Kueue visibility API failing (%s); retrying with back-off", e)
                    self.state, self.last_error = "failing", f"{type(e).__name__}: {e}"[:300]
                    self.version = None
                else:
                    if got is None:
                        delay = self.absent_recheck
                        self.version = None  # it may be installed meanwhile
                    else:
                        self._backoff.reset()
                        on_positions(*got)
            await asyncio.sleep(delay)
