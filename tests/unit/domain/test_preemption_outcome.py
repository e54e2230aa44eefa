"""Whether each preemption helped, from the objects a real v1.36.3 control plane served (tests/fixtures/real,
README: "Preemption outcomes").

The captured run: two 2-GPU victims on `gpu-a2` (`DisruptionTarget=True PreemptionByScheduler`), the
scheduler's `Preempted` events "Preempted by pod <uid> on node gpu-a2", the preemptor `debug-worker-0`
nominated there (`status.nominatedNodeName: gpu-a2`) and then bound there. The other outcomes are the same
objects with what the upstream API documents may happen instead (PodStatus.nominatedNodeName: "Scheduler may
decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the
resources on this node to a higher priority pod that is created after preemption"): the preemptor's
`spec.nodeName` another node, another pod bound on `gpu-a2`, the preemptor deleted, or nothing in the window.
"""

from __future__ import annotations

import copy
import json
from datetime import datetime
from typing import Any

import pytest

from tests.fixtures import FIXTURES
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.domain.preemption_outcome import (
    DELETED,
    DID_NOT_HELP,
    HELPED,
    ROOM_TAKEN,
    SKIP_NO_UID,
    SKIP_UNKNOWN,
    STARTED_ELSEWHERE,
    STILL_WAITING,
)
from watchtower.domain.state import ClusterState

REAL = FIXTURES / "real"


def parse_rfc3339(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


dec = ObjectDecoder()
WINDOW = 600.0


def load(name: str) -> Any:
    return json.loads((REAL / f"{name}.json").read_text())


def raw(obj: Any) -> bytes:
    return json.dumps(obj).encode()


VICTIM = load("preemption-victim-terminating")
NOMINATED = load("preemptor-nominated")
RUNNING = load("preemptor-running")
EVENTS = load("preempted-events-core-v1")["items"]
PREEMPTOR_UID = NOMINATED["metadata"]["uid"]
EVICTED_AT = parse_rfc3339("2026-11-29T23:18:19Z")
BOUND_AT = parse_rfc3339("2026-11-29T23:18:27Z")


def upsert(st: ClusterState, obj: Any) -> None:
    st.upsert_pod(dec.decode("Pod", raw(obj)))


def preempted() -> ClusterState:
    """The state once the victims were evicted and the preemptor nominated: open, not decided."""
    st = ClusterState()
    upsert(st, NOMINATED)
    upsert(st, VICTIM)
    for e in EVENTS:
        st.upsert_event(dec.decode("Event", raw(e)))
    return st


def bound_to(node: str) -> Any:
    obj = copy.deepcopy(RUNNING)
    obj["spec"]["nodeName"] = node
    return obj


def other_pod(node: str, *, gpus: int = 4) -> Any:
    """A pod created after the preemption (say of higher priority) that the scheduler bound on `node`."""
    obj = copy.deepcopy(RUNNING)
    obj["metadata"].update(name="urgent-worker-0", uid="uid-urgent-worker-0")
    obj["spec"]["nodeName"] = node
    for c in obj["spec"]["containers"]:
        c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}}
    return obj


def outcomes(st: ClusterState, now: float) -> dict[str, Any]:
    judged, _ = st.ledger.settle(now, WINDOW)
    return {p.victim_name: p.outcome for p in judged}


def test_the_captured_preemptor_started_where_its_victims_were_so_it_helped() -> None:
    st = preempted()
    assert outcomes(st, EVICTED_AT + 5) == {}  # open: nominated, not bound yet
    upsert(st, RUNNING)
    got = outcomes(st, BOUND_AT + 1)
    assert set(got) == {"resnet-worker-0", "resnet-worker-3"}
    o = got["resnet-worker-0"]
    assert (o.verdict, o.reason, o.node, o.nominated) == (HELPED, "", "gpu-a2", "gpu-a2")
    assert o.at == BOUND_AT and o.victims == 2
    # Only the victim whose pod was seen has a run time: its 2 GPUs × 4 s.
    assert o.gpu_hours_lost == pytest.approx(2 * 4 / 3600)
    assert o.words() == "helped: started on gpu-a2"
    # The records the snapshot lists carry it, and a later settle counts nothing again.
    assert all(p.outcome == o for p in st.ledger.preemptions.values())
    assert outcomes(st, BOUND_AT + 2 * WINDOW) == {}


def test_a_preemptor_bound_on_another_node_did_not_help_and_names_the_node() -> None:
    st = preempted()
    upsert(st, bound_to("gpu-a1"))
    o = outcomes(st, BOUND_AT + 1)["resnet-worker-0"]
    assert (o.verdict, o.reason, o.node, o.victim_nodes) == (
        DID_NOT_HELP,
        STARTED_ELSEWHERE,
        "gpu-a1",
        ("gpu-a2",),
    )
    assert o.words() == "did not help: started on gpu-a1, not on gpu-a2"
    assert o.gpu_hours_lost == pytest.approx(2 * 4 / 3600)


def test_a_preemptor_not_bound_within_the_window_is_still_waiting() -> None:
    st = preempted()
    assert outcomes(st, EVICTED_AT + WINDOW - 1) == {}
    o = outcomes(st, EVICTED_AT + WINDOW)["resnet-worker-0"]
    assert (o.verdict, o.reason, o.taken_by) == (DID_NOT_HELP, STILL_WAITING, "")
    assert not st.ledger.outcomes.open and not st.ledger.outcomes.by_node
    # Binding later changes nothing: the preemption was decided.
    upsert(st, RUNNING)
    assert outcomes(st, EVICTED_AT + WINDOW + 30) == {}
    assert st.ledger.preemptions[VICTIM["metadata"]["uid"]].outcome == o


def test_another_pod_bound_where_the_victims_were_took_the_room_and_is_named() -> None:
    st = preempted()
    upsert(st, other_pod("gpu-a2"))
    o = outcomes(st, EVICTED_AT + WINDOW)["resnet-worker-0"]
    assert (o.verdict, o.reason, o.taken_by) == (DID_NOT_HELP, ROOM_TAKEN, "e2e-preempt-crit/urgent-worker-0")
    assert "urgent-worker-0 took the room on gpu-a2" in o.words()


def test_the_room_taken_and_the_preemptor_started_elsewhere_says_both() -> None:
    st = preempted()
    upsert(st, other_pod("gpu-a2"))
    upsert(st, bound_to("gpu-a1"))
    o = outcomes(st, BOUND_AT + 1)["resnet-worker-0"]
    assert (o.reason, o.node, o.taken_by) == (STARTED_ELSEWHERE, "gpu-a1", "e2e-preempt-crit/urgent-worker-0")


def test_a_pod_without_gpus_bound_there_took_nothing_a_gpu_preemptor_waits_for() -> None:
    st = preempted()
    upsert(st, other_pod("gpu-a2", gpus=0))
    o = outcomes(st, EVICTED_AT + WINDOW)["resnet-worker-0"]
    assert (o.reason, o.taken_by) == (STILL_WAITING, "")


def test_a_preemptor_deleted_before_it_bound_did_not_help() -> None:
    st = preempted()
    gone = copy.deepcopy(NOMINATED)
    gone["metadata"]["deletionTimestamp"] = "2026-11-29T23:18:22Z"
    st.delete_pod(PREEMPTOR_UID, dec.decode("Pod", raw(gone)))
    o = outcomes(st, EVICTED_AT + 4)["resnet-worker-0"]
    assert (o.verdict, o.reason, o.at) == (DID_NOT_HELP, DELETED, parse_rfc3339("2026-11-29T23:18:22Z"))
    assert o.words() == "did not help: the preemptor was deleted before it started"


def test_events_read_after_the_preemptor_bound_are_decided_at_once() -> None:
    """A re-list after a restart: the events (kept an hour) come back after the preemptor already runs."""
    st = ClusterState()
    upsert(st, RUNNING)
    upsert(st, VICTIM)
    for e in EVENTS:
        st.upsert_event(dec.decode("Event", raw(e)))
    got = outcomes(st, BOUND_AT + 60)
    assert {o.verdict for o in got.values()} == {HELPED}


def test_a_victim_named_after_its_preemptor_was_decided_takes_the_same_outcome_once() -> None:
    st = ClusterState()
    upsert(st, NOMINATED)
    first, second = EVENTS
    st.upsert_event(dec.decode("Event", raw(first)))
    upsert(st, RUNNING)
    assert set(outcomes(st, BOUND_AT + 1)) == {"resnet-worker-0"}
    st.upsert_event(dec.decode("Event", raw(second)))
    st.upsert_event(dec.decode("Event", raw(second)))  # replayed
    got = outcomes(st, BOUND_AT + 2)
    assert list(got) == ["resnet-worker-3"] and got["resnet-worker-3"].helped
    # Both victims' records now count both (what a re-list, which reads pods before events, sees too).
    assert {p.outcome.victims for p in st.ledger.preemptions.values() if p.outcome} == {2}


def test_a_victim_whose_preemptor_is_never_named_is_a_counted_skip() -> None:
    """The victim's condition alone names no preemptor (its event lost): skipped after the window."""
    st = ClusterState()
    upsert(st, VICTIM)
    judged, skipped = st.ledger.settle(EVICTED_AT + WINDOW, WINDOW)
    assert judged == []
    assert [(s.reason, s.victim_uid) for s in skipped] == [(SKIP_NO_UID, VICTIM["metadata"]["uid"])]
    assert st.ledger.outcomes.skips[SKIP_NO_UID] == 1
    assert st.ledger.settle(EVICTED_AT + 2 * WINDOW, WINDOW) == ([], [])  # once
    assert st.ledger.preemptions[VICTIM["metadata"]["uid"]].outcome is None


def test_an_older_event_naming_the_preemptor_by_name_only_of_a_pod_never_seen_is_skipped() -> None:
    st = ClusterState()
    e = copy.deepcopy(EVENTS[0])
    e["message"] = "Preempted by e2e-preempt-crit/debug-worker-0 on node gpu-a2"
    st.upsert_event(dec.decode("Event", raw(e)))
    _, skipped = st.ledger.settle(EVICTED_AT + WINDOW + 1, WINDOW)
    assert [(s.reason, s.preemptor) for s in skipped] == [(SKIP_NO_UID, "e2e-preempt-crit/debug-worker-0")]


def test_a_preemptor_uid_never_seen_as_a_pod_is_a_counted_skip_not_a_verdict() -> None:
    st = ClusterState()
    for e in EVENTS:
        st.upsert_event(dec.decode("Event", raw(e)))
    judged, skipped = st.ledger.settle(EVICTED_AT + WINDOW + 1, WINDOW)
    assert judged == []
    assert {(s.reason, s.preemptor) for s in skipped} == {(SKIP_UNKNOWN, PREEMPTOR_UID)}
    assert st.ledger.outcomes.skips[SKIP_UNKNOWN] == 2
    assert not st.ledger.outcomes.open


def test_a_gang_preempting_as_a_podgroup_is_not_judged() -> None:
    """1.36 workload-aware preemption names the PodGroup "on node cluster": no node was nominated."""
    st = ClusterState()
    gang = load("k8s-gang-preemption")
    for e in (i for i in gang["items"] if i["kind"] == "Event" and i.get("reason") == "Preempted"):
        st.upsert_event(dec.decode("Event", raw(e)))
    assert st.ledger.preemptions
    assert st.ledger.settle(EVICTED_AT + 10 * WINDOW, WINDOW) == ([], [])
    assert not st.ledger.outcomes.open and not st.ledger.outcomes.unnamed


def test_memory_is_bounded_many_preemptions_resolve_and_are_forgotten_with_their_records() -> None:
    st = ClusterState()
    upsert(st, NOMINATED)
    base = EVENTS[0]
    for i in range(2000):
        e = copy.deepcopy(base)
        e["metadata"]["uid"] = f"ev-{i}"
        e["involvedObject"].update(uid=f"victim-{i}", name=f"v-{i}")
        e["message"] = f"Preempted by pod preemptor-{i} on node gpu-{i % 50}"
        st.upsert_event(dec.decode("Event", raw(e)))
    book = st.ledger.outcomes
    assert len(book.open) == 2000 and len(book.by_node) == 50
    _, skipped = st.ledger.settle(EVICTED_AT + WINDOW + 1, WINDOW)
    assert len(skipped) == 2000  # no such preemptor pods
    assert not book.open and not book.by_node
    st.ledger.prune(EVICTED_AT + WINDOW + 2, EVICTED_AT + WINDOW + 2)
    assert not st.ledger.preemptions and not book.resolved and not book.unnamed
