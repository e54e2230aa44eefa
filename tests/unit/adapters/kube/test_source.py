"""The Kubernetes adapter against a real HTTP server speaking list/watch (tests/unit/adapters/kube/fake_apiserver.py).

A real kube-apiserver comes with issue 6 (tests/e2e); until then these tests use the stand-in server,
which also lets them cut connections and expire resourceVersions on demand.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import msgspec

from tests.unit.adapters.kube.conftest import PODS, running, until
from tests.unit.adapters.kube.fake_apiserver import FakeApiServer
from watchtower.adapters.kube import KubeSource, Resource
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.domain.state import ClusterState
from watchtower.services.ingest import Ingestor
from watchtower.simulator import objects as o

T0 = 1_800_000_000.0


def make_pod(i: int, **kw: object) -> dict:
    return o.pod(name=f"job-{i}-worker-0", namespace="team-a", created=T0 + i, uid=f"uid-{i:05d}", **kw)  # type: ignore[arg-type]


def state_matches(r, server: FakeApiServer) -> bool:
    truth = server.truth(PODS)
    return set(r.state.pods) == set(truth) and all(
        r.state.pods[u].phase == truth[u]["status"]["phase"]
        and r.state.pods[u].node == truth[u]["spec"].get("nodeName", "")
        for u in truth
    )


async def test_lists_in_pages_then_follows_changes_until_state_equals_the_server(
    apiserver, tmp_path: Path
) -> None:
    for i in range(250):
        apiserver.put(PODS, make_pod(i))
    async with running(apiserver, tmp_path, page_size=100) as r:
        await until(lambda: r.source.kind_health("Pod").connected, "pod watch open")
        assert len(r.state.pods) == 250
        pod_lists = [q for m, p, q in apiserver.requests if p == PODS and "watch" not in q]
        assert [q.get("limit") for q in pod_lists] == ["100", "100", "100"]
        assert [bool(q.get("continue")) for q in pod_lists] == [False, True, True]

        apiserver.put(PODS, make_pod(7, node="gpu-1", phase="Running", conditions=[o.scheduled(T0 + 60)]))
        apiserver.delete(PODS, "uid-00008")
        apiserver.put(PODS, make_pod(999))
        await until(lambda: state_matches(r, apiserver), "state equals the server after changes")
        assert r.state.pods["uid-00007"].node == "gpu-1"
        assert r.source.kind_health("Pod").resource_version == str(apiserver.rv)
        assert {m for m, _, _ in apiserver.requests} == {"GET"}  # read-only


async def test_bookmark_advances_the_tracked_resource_version_without_a_change(
    apiserver, tmp_path: Path
) -> None:
    apiserver.put(PODS, make_pod(1))
    async with running(apiserver, tmp_path) as r:
        await until(lambda: r.source.kind_health("Pod").connected, "pod watch open")
        rv = apiserver.bookmark(PODS)
        await until(lambda: r.source.kind_health("Pod").resource_version == str(rv), "bookmark version taken")
        apiserver.close_watches(PODS)  # the next watch must resume from the bookmark, not the list
        await until(lambda: apiserver.watch_versions(PODS)[-1:] == [str(rv)], "watch resumed at bookmark")
        assert r.source.kind_health("Pod").relists == 0


async def test_connection_cut_mid_line_resumes_from_last_version_without_relisting(
    apiserver, tmp_path: Path
) -> None:
    for i in range(5):
        apiserver.put(PODS, make_pod(i))
    async with running(apiserver, tmp_path) as r:
        await until(lambda: r.source.kind_health("Pod").connected, "pod watch open")
        last = apiserver.put(PODS, make_pod(1, node="gpu-2", phase="Running"))["metadata"]["resourceVersion"]
        await until(lambda: r.source.kind_health("Pod").resource_version == last, "change seen")
        apiserver.cut(PODS)
        await until(lambda: r.source.kind_health("Pod").watch_restarts >= 1, "watch reopened")
        apiserver.put(PODS, make_pod(2, node="gpu-3", phase="Running"))
        apiserver.delete(PODS, "uid-00003")
        await until(lambda: state_matches(r, apiserver), "state equals the server after the cut")
        h = r.source.kind_health("Pod")
        assert h.relists == 0
        assert h.bad_lines == 1  # the truncated line
        assert last in apiserver.watch_versions(PODS)[1:]
        assert [k for k, _ in r.lists].count("Pod") == 1


async def test_garbled_line_is_counted_and_skipped_and_the_same_watch_goes_on(
    apiserver, tmp_path: Path
) -> None:
    apiserver.put(PODS, make_pod(1))
    async with running(apiserver, tmp_path) as r:
        await until(lambda: r.source.kind_health("Pod").connected, "pod watch open")
        apiserver.inject_line(PODS, b'{"type":"MODIFIED","object":{"kind":"Pod",\x00garbage')
        apiserver.inject_line(PODS, b'{"type":"SURPRISE","object":{}}')
        apiserver.put(PODS, make_pod(2))
        await until(lambda: "uid-00002" in r.state.pods, "the change after the garbage")
        h = r.source.kind_health("Pod")
        assert h.bad_lines == 2
        assert h.watch_restarts == 0
        assert r.source.health()["bad_lines"] == 2


async def _gone_then_relist(apiserver: FakeApiServer, tmp_path: Path, *, as_event: bool) -> None:
    for i in range(10):
        apiserver.put(PODS, make_pod(i))
    async with running(apiserver, tmp_path, page_size=3) as r:
        await until(lambda: r.source.kind_health("Pod").connected, "pod watch open")
        apiserver.hold(PODS)  # the changes below never reach this watch
        apiserver.delete(PODS, "uid-00001")
        apiserver.delete(PODS, "uid-00002")
        apiserver.put(PODS, make_pod(4, node="gpu-1", phase="Running"))
        apiserver.put(PODS, make_pod(20))
        apiserver.expire(PODS, as_event=as_event)
        await until(lambda: r.source.kind_health("Pod").relists == 1, "listed again after 410")
        await until(lambda: state_matches(r, apiserver), "state equals the server after the re-list")
        assert "uid-00001" not in r.state.pods and "uid-00020" in r.state.pods
        apiserver.put(PODS, make_pod(21))
        await until(lambda: "uid-00021" in r.state.pods, "watching again after the re-list")


async def test_http_410_gone_relists_and_drops_objects_deleted_meanwhile(apiserver, tmp_path: Path) -> None:
    # The open watch gets an ERROR 410 line; the retry from the old version then gets HTTP 410.
    await _gone_then_relist(apiserver, tmp_path, as_event=False)


async def test_error_event_410_relists_and_drops_objects_deleted_meanwhile(apiserver, tmp_path: Path) -> None:
    await _gone_then_relist(apiserver, tmp_path, as_event=True)


async def test_preemption_is_reported_once_across_a_relist(apiserver, tmp_path: Path) -> None:
    victim = make_pod(1, node="gpu-1", phase="Running", conditions=[o.scheduled(T0 + 5)], start_time=T0 + 6)
    apiserver.put(PODS, victim)
    async with running(apiserver, tmp_path) as r:
        await until(lambda: r.source.kind_health("Pod").connected, "pod watch open")
        target = o.condition(
            "DisruptionTarget",
            "True",
            T0 + 100,
            reason="PreemptionByScheduler",
            message="preempted by team-b/serve-0 on node gpu-1",
        )
        marked = make_pod(
            1,
            node="gpu-1",
            phase="Running",
            conditions=[o.scheduled(T0 + 5), target],
            start_time=T0 + 6,
            deletion=T0 + 100,
        )
        apiserver.put(PODS, marked)
        apiserver.put(PODS, make_pod(2))  # still listed after the victim is gone
        await until(lambda: "uid-00002" in r.state.pods, "victim marked")
        apiserver.hold(PODS)
        apiserver.delete(PODS, "uid-00001")
        apiserver.expire(PODS)
        await until(lambda: r.source.kind_health("Pod").relists == 1, "listed again")
        await until(lambda: state_matches(r, apiserver), "victim gone")
        from watchtower.domain.state import PreemptionSeen

        new = [h for h in r.happenings if isinstance(h, PreemptionSeen) and h.new]
        assert [h.preemption.victim_uid for h in new] == ["uid-00001"]
        assert list(r.state.ledger.preemptions) == ["uid-00001"]


async def test_malformed_listed_pod_is_skipped_and_counted_the_rest_is_kept(
    apiserver, tmp_path: Path
) -> None:
    apiserver.put(PODS, make_pod(1))
    bad = make_pod(2)
    bad["metadata"]["creationTimestamp"] = "yesterday"
    apiserver.put(PODS, bad)
    async with running(apiserver, tmp_path) as r:
        await until(lambda: r.source.kind_health("Pod").connected, "pod watch open")
        assert set(r.state.pods) == {"uid-00001"}
        assert r.ingestor.skipped["Pod"] == 1


async def test_each_listed_page_reaches_the_sink_before_the_rest_of_the_list_is_fetched(
    apiserver, tmp_path: Path
) -> None:
    for i in range(250):
        apiserver.put(PODS, make_pod(i))
    decoder = ObjectDecoder()
    source = KubeSource.connect(
        kubeconfig=str(apiserver.write_kubeconfig(tmp_path / "kubeconfig")),
        context=None,
        decoder=decoder,
        page_size=100,
        resources=(Resource("Pod", PODS),),
    )
    ingestor = Ingestor(ClusterState(), decoder)
    pages: list[tuple[int, bool, bool, int, int]] = []

    def on_list(kind: str, items: Sequence[msgspec.Raw], *, first: bool = True, last: bool = True) -> None:
        fetched = sum(1 for _, p, q in apiserver.requests if p == PODS and "watch" not in q)
        ingestor.list_page(kind, items, first=first, last=last)
        pages.append((len(items), first, last, fetched, len(ingestor.state.pods)))

    task = asyncio.create_task(source.run(on_list=on_list, on_change=lambda *a: None))
    try:
        await until(lambda: source.kind_health("Pod").connected, "pod watch open")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        source.transport.close()
    # The state grows page by page; at most the next page is fetched ahead while one is applied.
    assert [(n, first, last, held) for n, first, last, _, held in pages] == [
        (100, True, False, 100),
        (100, False, False, 200),
        (50, False, True, 250),
    ]
    assert [fetched <= k + 2 for k, (_, _, _, fetched, _) in enumerate(pages)] == [True, True, True]


async def test_a_watch_that_carries_nothing_is_taken_for_dead_at_its_deadline_and_resumed_missing_nothing(
    apiserver, tmp_path: Path
) -> None:
    apiserver.put(PODS, make_pod(0))
    async with running(apiserver, tmp_path, watch_silence=0.5) as r:
        assert r.source.silence_deadline() == 0.5
        await until(lambda: r.source.kind_health("Pod").connected, "pod watch open")
        apiserver.hold(PODS)  # the open watch stays open and sends nothing: no event, no bookmark
        apiserver.put(PODS, make_pod(1))  # made during the silence
        await until(lambda: r.source.kind_health("Pod").watch_restarts >= 1, "the silent watch given up")
        apiserver.hold(PODS, held=False)
        await until(lambda: state_matches(r, apiserver), "the pod made during the silence seen")
        h = r.source.kind_health("Pod")
        assert h.relists == 0, "resumed from its resourceVersion: nothing to list again"
        assert h.last_outage_seconds is not None and h.last_outage_seconds >= 0.5
        assert "carried nothing" in h.last_outage_error
        detail = r.source.health()["kinds"]["Pod"]  # type: ignore[index]
        assert detail["last_outage_seconds"] >= 0.5
