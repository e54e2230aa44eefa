"""The Kubernetes cluster source: paged LIST, then WATCH with bookmarks, per kind, until cancelled.

Each kind follows its own loop: list (pages of `page_size`, `continue` tokens), handing each page to
`on_list` as it arrives while the next one is fetched → watch from the list's resourceVersion, tracking
it from every event and bookmark → when the server ends the watch, watch again from where it stopped. 410 Gone (HTTP status or an ERROR event)
means the resourceVersion is too old: list again and let the Ingestor diff. Connection loss, 5xx and
truncated streams reconnect with exponential back-off and jitter; a line that cannot be read is
counted and skipped. A watch that carries nothing at all (no event, no bookmark, not even its end) for
`silence_deadline()` is taken for dead, closed and opened again from the last resourceVersion at once: a
stalled connection would otherwise look like a quiet cluster for as long as the read timeout. Blocking HTTP runs on threads; decoding and the sinks run on the event loop, so
the sinks never race with the rest of the service.
"""

from __future__ import annotations

import asyncio
import logging
import random

import urllib3

from watchtower.adapters.clock import SystemClock
from watchtower.domain.health import SourceHealth
from watchtower.domain.timefmt import format_duration
from watchtower.ports import Clock, ListSink, ObjectSink

from .backoff import Backoff
from .connection import ApiStatus, ClusterName, Query, Transport, named_client, status_error
from .decoder import DecodeError, ObjectDecoder
from .health import KindHealth, source_health, summary
from .lines import LineSplitter
from .resources import RESOURCES, Resource
from .stream import StreamPump

log = logging.getLogger(__name__)

# The API server ends a watch at its `timeoutSeconds`; a watch still silent this long after that is dead.
WATCH_END_GRACE = 10.0

CHANGE_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})


class WatchSilent(Exception):
    """A watch (or its request) brought no byte for the silence deadline: the connection is taken for dead."""

    def __init__(self, seconds: float, what: str) -> None:
        super().__init__(f"{what} for {format_duration(seconds)}: taken for a dead connection")


class KubeSource:
    """A `ClusterSource` reading a real API server through the official client (read-only)."""

    def __init__(
        self,
        transport: Transport,
        decoder: ObjectDecoder,
        *,
        page_size: int = 500,
        watch_timeout: float = 300.0,
        watch_silence: float = 90.0,
        resources: tuple[Resource, ...] = RESOURCES,
        clock: Clock | None = None,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        connect_timeout: float = 10.0,
        list_timeout: float = 120.0,
        stale_limit: float = 120.0,
        absent_recheck: float = 600.0,
        rng: random.Random | None = None,
    ) -> None:
        self.transport = transport
        self.decoder = decoder  # reads the list and watch framing; the sinks decode the objects
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.watch_silence = watch_silence
        self.resources = resources
        self.clock = clock or SystemClock()
        self._backoff = (backoff_base, backoff_cap)
        self._connect_timeout = connect_timeout
        self._list_timeout = list_timeout
        self.stale_limit = stale_limit
        self._absent_recheck = absent_recheck
        self._rng = rng or random.Random()
        self._kinds = {r.kind: KindHealth(r.kind) for r in resources}
        # Per kind, the path it is served at: the preferred version until a 404 says the cluster has
        # another (Workload is v1alpha1 on 1.35, v1alpha2 on 1.36).
        self._served = {r.kind: r.path for r in resources}
        self._started = self.clock.now()
        # The cluster's name from its configuration, when `connect` made this source.
        self.cluster_name: ClusterName | None = None

    @classmethod
    def connect(
        cls, *, kubeconfig: str | None, context: str | None, decoder: ObjectDecoder, **options: object
    ) -> KubeSource:
        """Return a source for `kubeconfig` (and context), else the cluster kubectl would reach.

        Raises KubeConfigError when there is none or its configuration is broken.
        """
        client, name = named_client(kubeconfig=kubeconfig, context=context, pool_size=len(RESOURCES) * 2 + 4)
        source = cls(Transport(client), decoder, **options)  # type: ignore[arg-type]
        source.cluster_name = name
        return source

    # ---- the port ----------------------------------------------------------------------------------

    async def run(self, *, on_list: ListSink, on_change: ObjectSink) -> None:
        """List then watch every kind until cancelled; reconnect by itself."""
        self._started = self.clock.now()
        async with asyncio.TaskGroup() as tg:
            for r in self.resources:
                tg.create_task(self._follow(r, on_list, on_change), name=f"watch-{r.kind}")

    def health(self) -> dict[str, object]:
        """Return overall `healthy`, `stale_seconds`, restart and bad-line counters, and per-kind detail."""
        return summary(self._kinds, now=self.clock.now(), started=self._started, stale_limit=self.stale_limit)

    def feed_health(self) -> SourceHealth:
        return source_health(
            self._kinds, now=self.clock.now(), started=self._started, stale_limit=self.stale_limit
        )

    def kind_health(self, kind: str) -> KindHealth:
        return self._kinds[kind]

    def served_path(self, kind: str) -> str:
        """Return the path a kind is listed from now (its version found by trying each in turn)."""
        return self._served[kind]

    def silence_deadline(self) -> float:
        """Return how long a watch may carry nothing before it is taken for dead.

        The API server's watch cache sends a watch that asked for bookmarks one about every minute, and
        ends every watch at its `timeoutSeconds`: so `watch_silence` (90 s: a missed bookmark and a half)
        or the watch's own end plus a grace, whichever comes first. It is the read timeout of each read.
        """
        return min(self.watch_silence, self.watch_timeout + WATCH_END_GRACE)

    # ---- one kind ------------------------------------------------------------------------------------

    async def _follow(self, r: Resource, on_list: ListSink, on_change: ObjectSink) -> None:
        h = self._kinds[r.kind]
        backoff = Backoff(*self._backoff, rng=self._rng)
        need_list, watched = True, False
        while True:
            try:
                if need_list:
                    rv = await self._list(r, h, on_list)
                    if h.synced:
                        h.relists += 1
                    h.synced, h.present, h.resource_version = True, True, rv
                    need_list = False
                if watched:
                    h.watch_restarts += 1
                watched = True
                progressed = await self._watch(r, h, on_change)
                if progressed:
                    backoff.reset()
                else:  # the server closes at once: do not spin
                    await asyncio.sleep(backoff.next())
            except asyncio.CancelledError:
                raise
            except ApiStatus as e:
                if e.code == 404 and r.optional:
                    paths = r.paths
                    at = paths.index(self._served[r.kind]) if self._served[r.kind] in paths else 0
                    if at + 1 < len(paths):
                        # Not served at this version: try the next one at once (discovery by listing).
                        self._served[r.kind] = paths[at + 1]
                        need_list = True
                        continue
                    self._served[r.kind] = paths[0]  # checked again later from the preferred version
                    if h.present:
                        log.debug("%s: not served by this cluster (404), checking again later", r.kind)
                    h.present, h.connected, h.synced = False, False, False
                    self._reachable(r, h)
                    need_list = True
                    await asyncio.sleep(self._absent_recheck)
                    continue
                if e.gone:
                    log.info(
                        "%s: resourceVersion %s expired (410): listing again", r.kind, h.resource_version
                    )
                    need_list = True
                    continue
                await self._failed(r, h, backoff, e)
            except WatchSilent as e:
                # Stale since the last byte, not since now: changes may have been missed all along.
                h.failed(self.clock.now(), str(e), retry_in=0.0, since=h.last_contact)
                log.warning("%s: %s; watching again from resourceVersion %s", r.kind, e, h.resource_version)
            except Exception as e:  # connection loss, timeouts, garbled list bodies: retry later
                await self._failed(r, h, backoff, e)

    async def _failed(self, r: Resource, h: KindHealth, backoff: Backoff, e: Exception) -> None:
        # One line when an outage starts and one when it ends (`_reachable`): the attempts in between are
        # in /readyz (consecutive failures, next retry, last error), not in the log.
        delay = backoff.next()
        if h.failed(self.clock.now(), f"{type(e).__name__}: {e}", retry_in=delay):
            log.warning(
                "%s: cannot list/watch: %s; retrying with back-off (next in %.1fs), quiet until it recovers",
                r.kind,
                h.last_error,
                delay,
            )
        else:
            log.debug("%s: attempt %d failed: %s", r.kind, h.consecutive_failures, h.last_error)
        await asyncio.sleep(delay)

    def _reachable(self, r: Resource, h: KindHealth) -> None:
        failures = h.consecutive_failures
        down = h.recovered(self.clock.now())
        if down is not None:
            log.info(
                "%s: reachable again after %s down (%d failed attempts)",
                r.kind,
                format_duration(down),
                failures,
            )

    # ---- LIST --------------------------------------------------------------------------------------

    def _fetch(self, path: str, query: Query) -> bytes:
        resp = self.transport.get(path, query, timeout=(self._connect_timeout, self._list_timeout))
        try:
            return resp.read()
        finally:
            resp.release_conn()

    def _page_query(self, cont: str) -> Query:
        query: Query = [("limit", str(self.page_size))]
        if cont:
            query.append(("continue", cont))
        return query

    async def _list(self, r: Resource, h: KindHealth, on_list: ListSink) -> str:
        """Hand every object of the kind to `on_list`, page by page; return the list's resourceVersion.

        The next page is fetched on a thread while this one is decoded and applied on the loop, so the
        transfer and the decoding overlap; at most two pages are held at once.
        """

        def fetch(cont: str) -> asyncio.Future[bytes]:
            path = self._served[r.kind]
            return asyncio.ensure_future(asyncio.to_thread(self._fetch, path, self._page_query(cont)))

        cont, expired, first = "", 0, True
        pending = fetch(cont)
        try:
            while True:
                try:
                    data = await pending
                except ApiStatus as e:
                    # The continue token outlived the snapshot it pages: start the list over, a few times.
                    if cont and e.gone and expired < 3:
                        expired += 1
                        cont, first = "", True
                        pending = fetch(cont)
                        continue
                    raise
                page, rv, cont = self.decoder.list_page(data)
                del data
                if cont:
                    pending = fetch(cont)
                h.contact(self.clock.now())
                # A page whose items turn out unreadable raises out of the sink: the list is tried again.
                on_list(r.kind, page, first=first, last=not cont)
                del page
                first = False
                if not cont:
                    return rv
        finally:
            # A page fetched for a list that failed: nobody will read it, nor report how it failed.
            if not pending.cancel() and not pending.cancelled():
                pending.exception()

    # ---- WATCH -------------------------------------------------------------------------------------

    async def _watch(self, r: Resource, h: KindHealth, on_change: ObjectSink) -> bool:
        """Follow one watch until the server ends it; return whether any line arrived.

        Raises ApiStatus (410 means list again) or the transport's error.
        """
        query: Query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", h.resource_version),
            ("timeoutSeconds", str(max(1, int(self.watch_timeout)))),
        ]
        silence = self.silence_deadline()
        timeout = (self._connect_timeout, silence)
        path = self._served[r.kind]
        try:
            resp = await asyncio.to_thread(self.transport.get, path, query, timeout=timeout)
        except urllib3.exceptions.ReadTimeoutError:
            raise WatchSilent(silence, "no answer to the watch request") from None
        pump = StreamPump(resp)
        h.connected = True
        self._reachable(r, h)
        h.contact(self.clock.now())
        splitter = LineSplitter()
        progressed = False
        try:
            while True:
                try:
                    chunks = await pump.chunks()
                except urllib3.exceptions.ReadTimeoutError:
                    raise WatchSilent(silence, "the watch carried nothing (no event, no bookmark)") from None
                if not chunks:
                    return progressed
                h.contact(self.clock.now())
                for chunk in chunks:
                    for line in splitter.feed(chunk):
                        progressed = True
                        self._line(r, h, line, on_change)
        finally:
            h.connected = False
            pump.close()
            if splitter.rest():
                self._bad_line(r, h, "stream ended inside a line (truncated)")

    def _line(self, r: Resource, h: KindHealth, line: bytes, on_change: ObjectSink) -> None:
        dec = self.decoder
        try:
            typ, obj = dec.decode_watch_line(line)
        except DecodeError as e:
            self._bad_line(r, h, str(e))
            return
        if typ in CHANGE_TYPES and obj is not None:
            try:
                rv = dec.head(obj)[1]
            except DecodeError:
                rv = ""  # the Ingestor reports the object; the stream position stays where it was
            try:
                on_change(r.kind, typ, obj)
            except Exception:
                log.exception("%s: the change sink failed on a %s event; skipped", r.kind, typ)
            if rv:
                h.resource_version = rv
        elif typ == "BOOKMARK" and obj is not None:
            try:
                rv = dec.head(obj)[1]
            except DecodeError as e:
                self._bad_line(r, h, f"bookmark: {e}")
                return
            if rv:
                h.resource_version = rv
        elif typ == "ERROR":
            raise status_error(500, obj if obj is not None else b"{}")
        else:
            self._bad_line(r, h, f"unexpected watch event type {typ[:40]!r}")

    def _bad_line(self, r: Resource, h: KindHealth, why: str) -> None:
        h.bad_lines += 1
        if h.bad_lines <= 5 or h.bad_lines % 1000 == 0:
            log.warning(
                "%s: skipped an unreadable watch line (%d so far): %s", r.kind, h.bad_lines, why[:200]
            )
