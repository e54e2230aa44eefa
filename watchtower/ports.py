"""The ports: what the services need from the outside world, as Protocols the adapters implement."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import msgspec


class Clock(Protocol):
    def now(self) -> float:
        """Return the current time, Unix epoch seconds."""
        ...


class SystemClock:
    def now(self) -> float:
        import time

        return time.time()


# A sink for one decoded-or-not API change: (kind, "ADDED"|"MODIFIED"|"DELETED", raw object).
ObjectSink = Callable[[str, str, msgspec.Raw | bytes], None]


class ListSink(Protocol):
    """Takes a LIST of one kind (the initial list, or a re-list after 410 Gone) page by page as it arrives.

    `first` starts a list and `last` ends it: objects of the kind not given since `first` are gone. A
    page is applied when it arrives, so a 150,000-pod list is never held whole. A source that has the
    whole list at once (the simulator, a dump) makes one call and leaves both flags at their default.
    """

    def __call__(
        self, kind: str, items: Sequence[msgspec.Raw], *, first: bool = True, last: bool = True
    ) -> None: ...


class ClusterSource(Protocol):
    """Feeds API objects of every watched kind: the Kubernetes adapter or the simulator."""

    async def run(self, *, on_list: ListSink, on_change: ObjectSink) -> None:
        """List then watch until cancelled; reconnect by itself."""
        ...

    def health(self) -> dict[str, object]:
        """Return how fresh the picture is: per kind, last successful contact and restarts."""
        ...


class MetricsSource(Protocol):
    async def query(self, promql: str, *, at: float | None = None) -> list[dict[str, object]]: ...


class Notifier(Protocol):
    async def send(self, payload: object) -> None: ...


Shutdown = Callable[[], Awaitable[None]]
