"""Work that waits before or beside its pods: upstream gangs, Volcano PodGroups, PaddleJobs with no pods."""

from __future__ import annotations

import copy
import json
from typing import Any

from tests.fixtures import FIXTURES
from tests.unit.domain.helpers import DECODER, NS, POLICY, T0, apply, job_owner, raw
from watchtower.domain.queue import QueueEvaluator, WorkloadState
from watchtower.domain.state import ClusterState
from watchtower.domain.workloads import WorkloadKey
from watchtower.simulator import objects as o

REAL = FIXTURES / "real"


def load(name: str) -> Any:
    return json.loads((REAL / f"{name}.json").read_text())


def put(state: ClusterState, obj: dict[str, Any]) -> None:
    """Apply an object, gang kinds included, as the Ingestor would."""
    apply(state, obj)


def gang_pod(i: int, *, group: str = "trainer-0", created: float = T0, **kw: Any) -> dict[str, Any]:
    """A 1.36 pod of a gang: spec.schedulingGroup names its PodGroup; in PreEnqueue it has no condition."""
    p = o.pod(name=f"trainer-{i}", namespace=NS, created=created + i, gpus=2, **kw)
    p["spec"]["schedulingGroup"] = {"podGroupName": group}
    return p


def only(state: ClusterState, now: float) -> Any:
    waiting = QueueEvaluator(POLICY).evaluate(state, now=now).waiting()
    assert len(waiting) == 1, waiting
    return waiting[0]


def test_an_incomplete_upstream_gang_waits_with_its_own_words_from_its_oldest_pod() -> None:
    state = ClusterState()
    put(state, load("podgroup-v1alpha2-gang-incomplete"))
    for i in range(3):
        put(state, gang_pod(i))
    w = only(state, T0 + 600)
    assert w.key == WorkloadKey(NS, "PodGroup", "trainer-0")  # bare pods: their PodGroup is the workload
    assert w.why == "gang incomplete: 3 of minCount 4 pods exist"
    assert (w.state, w.source, w.pods_expected, w.pods_existing, w.group) == (
        WorkloadState.PENDING,
        "podgroup",
        4,
        3,
        "trainer-0",
    )
    assert w.wait_seconds == 600.0  # from the oldest pod's creation
    assert w.gang
    # The gang asks for its minimum: the pod not made yet asks as its siblings do (3 × 2 + 1 × 2).
    assert (w.gpus_requested, w.gpus_per_pod) == (8, 2)


def test_a_complete_gang_not_scheduled_says_what_the_scheduler_wrote_on_its_group() -> None:
    state = ClusterState()
    put(state, load("podgroup-v1alpha2-unschedulable"))
    for i in range(4):
        put(state, gang_pod(i))
    w = only(state, T0 + 60)
    assert w.source == "podgroup" and w.pods_expected == 4
    assert w.why.startswith("no node fits (4 tried): 4 nodes lack 2 free GPUs")


def test_a_scheduled_gang_stays_scheduled_and_its_pods_speak_for_themselves() -> None:
    state = ClusterState()
    put(state, load("podgroup-v1alpha2-scheduled"))
    put(state, load("podgroup-v1alpha2-gang-incomplete"))  # an older status replayed: once true, stays
    assert state.gangs.pod_groups[(NS, "trainer-0")].scheduled
    for i in range(4):
        put(state, gang_pod(i))
    w = only(state, T0 + 60)
    assert (w.source, w.why) == ("pods", "waiting for the scheduler to try it")


def test_a_job_owner_stays_the_key_of_pods_that_name_a_135_workload() -> None:
    state = ClusterState()
    put(state, load("workload-v1alpha1-gang"))
    for i in range(2):
        p = gang_pod(i, owner=job_owner("trainer"))
        del p["spec"]["schedulingGroup"]
        p["spec"]["workloadRef"] = {"name": "trainer", "podGroup": "workers"}
        put(state, p)
    w = only(state, T0 + 60)
    assert w.key == WorkloadKey(NS, "Job", "trainer")
    assert w.why == "gang incomplete: 2 of minCount 4 pods exist"
    # The Workload arriving again changes nothing; its minimum changing is re-derived.
    evaluator = QueueEvaluator(POLICY)
    evaluator.evaluate(state, now=T0 + 60)
    put(state, load("workload-v1alpha1-gang"))
    assert evaluator.evaluate(state, now=T0 + 61).waiting()[0].why == w.why
    changed = load("workload-v1alpha1-gang")
    changed["spec"]["podGroups"][0]["policy"]["gang"]["minCount"] = 3
    put(state, changed)
    assert (
        evaluator.evaluate(state, now=T0 + 62).waiting()[0].why
        == "gang incomplete: 2 of minCount 3 pods exist"
    )


def test_the_group_arriving_after_its_pods_re_derives_the_workload() -> None:
    state, evaluator = ClusterState(), QueueEvaluator(POLICY)
    for i in range(3):
        put(state, gang_pod(i))
    assert evaluator.evaluate(state, now=T0 + 10).waiting()[0].why == "waiting for the scheduler to try it"
    put(state, load("podgroup-v1alpha2-gang-incomplete"))
    assert (
        evaluator.evaluate(state, now=T0 + 11).waiting()[0].why
        == "gang incomplete: 3 of minCount 4 pods exist"
    )


def paddle_job(**status: Any) -> dict[str, Any]:
    job = load("paddlejob-pending-no-pods")
    job["status"].update(status)
    return job


def classes(state: ClusterState) -> None:
    put(state, o.priority_class("experiment", 500_000))


def test_a_paddlejob_with_no_pods_waits_from_its_creation_with_its_tier_and_gpus() -> None:
    state = ClusterState()
    classes(state)
    put(state, paddle_job())
    w = only(state, T0 + 1800)
    assert w.key == WorkloadKey(NS, "PaddleJob", "ocr-train")
    assert (w.state, w.why, w.source) == (WorkloadState.PENDING, "no pods created yet", "paddlejob")
    assert (w.tier, w.priority_class, w.gpus_requested, w.pods_expected, w.wait_seconds) == (
        "medium",
        "experiment",
        8,
        4,
        1800.0,
    )


def test_a_paddlejob_at_its_namespace_quota_is_quota_blocked_and_the_numbers_are_said() -> None:
    state = ClusterState()
    classes(state)
    quota = load("resourcequota-gpu")
    quota["metadata"]["namespace"] = NS
    put(state, quota)
    q = DECODER.decode("ResourceQuota", raw(quota))
    put(state, paddle_job())
    w = only(state, T0 + 60)
    assert w.state is WorkloadState.QUOTA_BLOCKED and w.source == "quota"
    assert w.why == (
        f"ResourceQuota {q.name} at its limit: requests.nvidia.com/gpu used {q.used_gpus} + asked 8"
        f" > hard {q.hard_gpus}"
    )


def test_a_paddlejob_held_by_volcano_says_volcanos_words_and_names_its_queue() -> None:
    state = ClusterState()
    classes(state)
    put(state, load("volcano-queue"))
    put(state, load("volcano-podgroup-shaped"))
    put(state, paddle_job())
    w = only(state, T0 + 60)
    assert (w.source, w.queue, w.group, w.state) == (
        "volcano-podgroup",
        "vision-q",
        "ocr-train",
        WorkloadState.PENDING,
    )
    # Volcano's "4/4 tasks in gang unschedulable: ..." in words (messages.py reads its grammar).
    assert (
        w.why
        == "its gang cannot be placed: the scheduler cannot fit the minimum of 4 pods together (only 0 placed)"
    )
    q = state.gangs.queues["vision-q"]
    assert (q.capability_gpus, q.deserved_gpus, q.guarantee_gpus, q.allocated_gpus, q.weight) == (
        32,
        16,
        8,
        12,
        4,
    )


def test_a_running_or_finished_paddlejob_does_not_wait_and_replays_change_nothing() -> None:
    state, evaluator = ClusterState(), QueueEvaluator(POLICY)
    classes(state)
    put(state, paddle_job())
    put(state, paddle_job())
    assert len(evaluator.evaluate(state, now=T0 + 1).waiting()) == 1
    put(state, paddle_job(phase="Running", worker={"running": 4}))
    assert evaluator.evaluate(state, now=T0 + 2).waiting() == []
    put(state, paddle_job(phase="Completed", worker={"succeeded": 4}))
    assert evaluator.evaluate(state, now=T0 + 3).waiting() == []


def test_volcano_pods_name_their_group_by_annotation_and_wait_in_it() -> None:
    state = ClusterState()
    group = copy.deepcopy(load("volcano-podgroup-shaped"))
    del group["metadata"]["ownerReferences"]
    group["status"]["conditions"] = []
    put(state, group)
    for i in range(2):
        p = o.pod(
            name=f"ocr-{i}",
            namespace=NS,
            created=T0,
            annotations={"scheduling.k8s.io/group-name": "ocr-train"},
        )
        put(state, p)
    w = only(state, T0 + 5)
    assert w.key == WorkloadKey(NS, "PodGroup", "ocr-train")
    assert (w.why, w.source, w.queue) == (
        "gang incomplete: 2 of minMember 4 pods exist",
        "volcano-podgroup",
        "vision-q",
    )
    assert w.annotations == {}  # the group annotation is read into the group, not shown as a note
