"""What the state reports as newly happened: only transitions it saw, once each."""

from __future__ import annotations

from tests.unit.domain.helpers import NS, T0, apply
from watchtower.domain.state import ClusterState, PodScheduled, PodStarted
from watchtower.simulator import objects as o


def _pending(uid: str) -> dict:
    return o.pod(
        name="w-0",
        namespace=NS,
        uid=uid,
        created=T0,
        conditions=[o.unschedulable(T0 + 1, "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.")],
    )


def _bound(uid: str, *, running: bool) -> dict:
    return o.pod(
        name="w-0", namespace=NS, uid=uid, created=T0, node="gpu-0", phase="Running",
        conditions=[o.scheduled(T0 + 600)], start_time=T0 + 600, running_since=T0 + 660 if running else None,
    )  # fmt: skip


def test_a_pod_seen_pending_then_bound_reports_its_wait_and_then_its_start_up_once() -> None:
    state = ClusterState()
    assert apply(state, _pending("u1")) == []
    scheduled = apply(state, _bound("u1", running=False))
    assert [(type(h), h.wait) for h in scheduled if isinstance(h, PodScheduled)] == [(PodScheduled, 600.0)]
    started = apply(state, _bound("u1", running=True))
    assert [h.latency for h in started if isinstance(h, PodStarted)] == [60.0]
    # The same object again (a replay after a re-list) reports nothing.
    assert apply(state, _bound("u1", running=True)) == []


def test_a_pod_first_seen_already_running_reports_no_wait() -> None:
    """After a restart the initial LIST holds pods scheduled long ago: they are not new observations."""
    state = ClusterState()
    assert apply(state, _bound("u2", running=True)) == []
