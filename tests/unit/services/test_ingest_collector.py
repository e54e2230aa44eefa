"""The Ingestor pauses the cyclic garbage collector while it applies a LIST page, and only then.

Decoding a page of pods makes thousands of short-lived, acyclic lists; collections set off by them walk
the whole heap for nothing. These tests check the pause begins and ends where it should, whatever the
page does, and that a pause someone else made is left alone.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import msgspec
import orjson
import pytest

from watchtower.adapters.kube.decoder import DecodeError, ObjectDecoder
from watchtower.domain.state import ClusterState, PreemptionSeen
from watchtower.services.ingest import Ingestor, Skipped
from watchtower.simulator import objects as o

T0 = 1_800_000_000.0


def pod(i: int, **kw: object) -> bytes:
    return orjson.dumps(o.pod(name=f"p-{i}", namespace="team-a", created=T0 + i, uid=f"u{i}", **kw))  # type: ignore[arg-type]


def body(*items: bytes) -> bytes:
    return b'{"kind":"PodList","metadata":{"resourceVersion":"7"},"items":[' + b",".join(items) + b"]}"


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_paused_while_a_page_is_applied_and_resumed_after(collector_on: None) -> None:
    seen: list[bool] = []  # the collector's state when the Ingestor reports a skipped pod mid-page
    ing = Ingestor(ClusterState(), ObjectDecoder(), on_skip=lambda s: seen.append(gc.isenabled()))
    bad = orjson.dumps({"metadata": {"name": "no-namespace", "uid": "ux"}})
    page, _, _ = ing.decoder.list_page(body(pod(1), bad, pod(2)))
    ing.list_page("Pod", page, first=True, last=True)
    assert seen == [False]
    assert gc.isenabled()
    assert set(ing.state.pods) == {"u1", "u2"}


def test_the_collector_is_resumed_when_a_page_cannot_be_read(collector_on: None) -> None:
    ing = Ingestor(ClusterState(), ObjectDecoder())
    page, _, _ = ing.decoder.list_page(body(pod(1), pod(2))[:-40])  # truncated
    with pytest.raises(DecodeError):
        ing.list_page("Pod", page, first=True, last=True)
    assert gc.isenabled()


def test_a_collector_paused_by_someone_else_stays_paused(collector_on: None) -> None:
    ing = Ingestor(ClusterState(), ObjectDecoder())
    gc.disable()
    ing.list_page("Pod", [msgspec.Raw(pod(1))], first=True, last=True)
    assert not gc.isenabled()
    assert set(ing.state.pods) == {"u1"}


def test_a_preempted_pod_in_the_first_list_is_reported() -> None:
    # The first list takes a path of its own (nothing held before to cross off): it still reports.
    victim = pod(
        1,
        node="n1",
        phase="Running",
        deletion=T0 + 50,
        conditions=[o.condition("DisruptionTarget", "True", T0 + 40, reason="PreemptionByScheduler")],
    )
    ing = Ingestor(ClusterState(), ObjectDecoder())
    page, _, _ = ing.decoder.list_page(body(pod(2), victim))
    out = ing.list_page("Pod", page, first=True, last=True)
    assert [h.preemption.victim_uid for h in out if isinstance(h, PreemptionSeen)] == ["u1"]


def test_a_skipped_pod_is_reported_once_with_its_uid() -> None:
    skips: list[Skipped] = []
    ing = Ingestor(ClusterState(), ObjectDecoder(), on_skip=skips.append)
    bad = orjson.dumps({"metadata": {"name": "n", "namespace": "team-a", "uid": "ubad"}})
    for first in (True, False):
        page, _, _ = ing.decoder.list_page(body(pod(1), bad))
        ing.list_page("Pod", page, first=first, last=not first)
    assert [s.uid for s in skips] == ["ubad"]
    assert ing.skipped["Pod"] == 2
