from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pytest

from tests.unit.adapters.kube.fake_apiserver import FakeApiServer
from watchtower.adapters.kube import RESOURCES, KubeSource
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.domain.state import ClusterState, Happening
from watchtower.services.ingest import Ingestor

PODS = "/api/v1/pods"
SERVED = [r.path for r in RESOURCES if not r.optional]


class ManualClock:
    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


@dataclass
class Running:
    source: KubeSource
    state: ClusterState
    ingestor: Ingestor
    happenings: list[Happening] = field(default_factory=list)
    lists: list[tuple[str, int]] = field(default_factory=list)  # (kind, items) per complete LIST
    pages: list[tuple[str, int, bool, bool]] = field(default_factory=list)  # (kind, items, first, last)


@pytest.fixture
def apiserver() -> Iterator[FakeApiServer]:
    s = FakeApiServer(SERVED).start()
    yield s
    s.stop()


async def until(pred: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    """Wait for a condition the adapter should reach; fail with `what` if it does not (generous limit)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not pred():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for: {what}")
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def running(
    server: FakeApiServer, tmp_path: Path, *, clock: ManualClock | None = None, **options: object
) -> AsyncIterator[Running]:
    decoder = ObjectDecoder()
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    opts: dict[str, object] = {"backoff_base": 0.02, "backoff_cap": 0.1, "page_size": 100}
    opts.update(options)
    if clock is not None:
        opts["clock"] = clock
    source = KubeSource.connect(kubeconfig=str(kubeconfig), context=None, decoder=decoder, **opts)
    state = ClusterState()
    ingestor = Ingestor(state, decoder)
    r = Running(source, state, ingestor)

    listing: dict[str, int] = {}

    def on_list(kind: str, items: Sequence[msgspec.Raw], *, first: bool = True, last: bool = True) -> None:
        r.pages.append((kind, len(items), first, last))
        listing[kind] = (0 if first else listing[kind]) + len(items)
        r.happenings.extend(ingestor.list_page(kind, items, first=first, last=last))
        if last:
            r.lists.append((kind, listing.pop(kind)))

    def on_change(kind: str, typ: str, raw: object) -> None:
        r.happenings.extend(ingestor.apply(kind, typ, raw))  # type: ignore[arg-type]

    task = asyncio.create_task(source.run(on_list=on_list, on_change=on_change))
    try:
        yield r
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        source.transport.close()
