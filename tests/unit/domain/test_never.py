"""Work that can never start as the cluster is configured, told apart from work that waits for busy nodes.

Built from upstream shapes (sources in tests/fixtures/real/README.md, "Never"): the nodes' allocatable and
labels (core/v1 Node), kube-apiserver's ResourceQuota refusal ("exceeded quota: ..., requested: ..., used:
..., limited: ..."), and Kueue's QuotaReserved=False reasons and messages (kueue v0.20
apis/kueue/v1beta2/workload_types.go, pkg/scheduler/flavorassigner/flavorassigner.go fitsResourceQuota,
pkg/scheduler/scheduler.go, pkg/controller/core/workload_controller.go).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.fixtures import FIXTURES
from tests.unit.domain.helpers import NS, POLICY, T0, apply, pending_pod, running_pod, state_of
from watchtower.config.model import Settings
from watchtower.domain.alerts.lifecycle import LifecyclePolicy, advance
from watchtower.domain.alerts.model import AlertState
from watchtower.domain.alerts.muting import muted
from watchtower.domain.alerts.rules import RuleInput, evaluate_rules
from watchtower.domain.estimate import ScheduleHistory
from watchtower.domain.never import NodeInventory, PodShape, quantity
from watchtower.domain.queue import QueueEvaluator, WorkloadState
from watchtower.domain.records import Node
from watchtower.domain.state import ClusterState
from watchtower.domain.workloads import WorkloadKey
from watchtower.services.queue_json import workload_dict
from watchtower.simulator import objects as o

REAL = FIXTURES / "real"
FULL = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."


def big_pod(name: str = "llm-0", gpus: int = 16, **kw: Any) -> dict[str, Any]:
    return pending_pod(name, gpus=gpus, message=FULL, **kw)


def node(name: str, gpus: int = 8, labels: dict[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    n = o.node(name, gpus=gpus, **kw)
    if labels:
        n["metadata"]["labels"] = labels
    return n


def only(ev: QueueEvaluator, st: ClusterState, now: float = T0 + 600) -> Any:
    waiting = ev.evaluate(st, now=now).waiting()
    assert len(waiting) == 1, waiting
    return waiting[0]


# ---- the nodes --------------------------------------------------------------------------------------


def test_a_pod_asking_more_gpus_than_any_node_has_can_never_start_and_says_its_numbers() -> None:
    st = state_of(node("gpu-1"), node("gpu-2"), big_pod())
    w = only(QueueEvaluator(POLICY), st)
    assert w.never is not None
    assert (w.never.reason, w.never.asks, w.never.limit, w.never.source) == (
        "node_resources",
        "16 GPUs per pod",
        "the largest schedulable node has 8",
        "nodes",
    )
    assert w.why.startswith(
        "can never start as configured: asks 16 GPUs per pod, the largest schedulable node has 8"
    )
    # No estimate: it says never, whatever the tier's recent waits.
    history = ScheduleHistory(min_samples=1)
    history.record(w.tier, at=T0, wait=60.0)
    est = history.waits(T0 + 600).estimate(w)
    assert est is not None and est.start_in is None and est.never
    assert est.text == "never: " + w.never.text


def test_a_pod_waiting_for_busy_nodes_of_its_size_is_not_never() -> None:
    st = state_of(
        node("gpu-1"),
        node("gpu-2"),
        running_pod("a", "gpu-1", gpus=8),
        running_pod("b", "gpu-2", gpus=8),
        big_pod("wants-8", gpus=8),
    )
    w = only(QueueEvaluator(POLICY), st)
    assert w.never is None
    assert "never" not in w.why


def test_a_big_node_added_clears_it_and_removing_it_brings_it_back() -> None:
    ev = QueueEvaluator(POLICY)
    st = state_of(node("gpu-1"), big_pod())
    assert only(ev, st).never is not None
    apply(st, node("gpu-big", gpus=16))
    w = only(ev, st, T0 + 660)  # the same evaluator: no pod changed, the inventory did
    assert w.never is None and "never" not in w.why
    st.delete_node("gpu-big")
    assert only(ev, st, T0 + 720).never is not None


def test_a_cordoned_big_node_does_not_count() -> None:
    st = state_of(node("gpu-1"), node("gpu-big", gpus=16, unschedulable_=True), big_pod())
    assert only(QueueEvaluator(POLICY), st).never is not None


def test_no_node_listed_says_nothing_of_never() -> None:
    st = state_of(big_pod())
    assert only(QueueEvaluator(POLICY), st).never is None
    # Every device plugin restarting: nodes report 0 GPUs for a while, which says nothing of never either.
    st = state_of(node("gpu-1", gpus=0), node("gpu-2", gpus=0), big_pod())
    assert only(QueueEvaluator(POLICY), st).never is None


def test_cpu_or_memory_above_every_node_is_never_too() -> None:
    st = state_of(node("gpu-1", cpu="96"), big_pod(gpus=1, cpu="200"))
    w = only(QueueEvaluator(POLICY), st)
    assert w.never is not None
    assert (w.never.asks, w.never.limit) == ("200 CPU per pod", "the largest schedulable node has 96 CPU")
    st = state_of(node("gpu-1", memory="768Gi"), big_pod(gpus=1, memory="1Ti"))
    w = only(QueueEvaluator(POLICY), st)
    assert w.never is not None
    assert (w.never.asks, w.never.limit) == (
        "1Ti of memory per pod",
        "the largest schedulable node has 768Gi",
    )


def test_a_node_selector_no_node_matches_is_never_until_a_node_carries_the_label() -> None:
    p = big_pod(gpus=1)
    p["spec"]["nodeSelector"] = {"gpu": "h100"}
    ev = QueueEvaluator(POLICY)
    st = state_of(node("gpu-1", labels={"gpu": "a100"}), p)
    w = only(ev, st)
    assert w.never is not None and w.never.reason == "node_selector"
    assert w.never.text == (
        "can never start as configured: asks nodes labelled gpu=h100, no schedulable node has those labels"
    )
    apply(st, node("gpu-2", labels={"gpu": "h100"}))
    assert only(ev, st, T0 + 660).never is None


def test_a_gang_whose_minimum_cannot_be_placed_even_on_empty_nodes_is_never() -> None:
    # The upstream PodGroup of minCount 4 (podgroup-v1alpha2-unschedulable), pods of 2 GPUs each.
    group = json.loads((REAL / "podgroup-v1alpha2-unschedulable.json").read_text())
    ev = QueueEvaluator(POLICY)
    st = state_of(node("gpu-1", gpus=4), group)
    for i in range(4):
        p = o.pod(name=f"trainer-{i}", namespace=NS, created=T0 + i, gpus=2)
        p["spec"]["schedulingGroup"] = {"podGroupName": "trainer-0"}
        apply(st, p)
    w = only(ev, st)
    assert w.never is not None and w.never.reason == "gang"
    assert w.never.text == (
        "can never start as configured: asks 4 pods of 2 GPUs + 4 CPU + 32Gi at once, the schedulable "
        "nodes hold at most 2 such pods even empty"
    )
    apply(st, node("gpu-2", gpus=4))
    assert only(ev, st, T0 + 660).never is None  # 2 + 2: it fits once both are free


def test_the_inventory_keeps_its_verdicts_per_shape() -> None:
    inv = NodeInventory([Node("a", gpus=8), Node("b", gpus=8)], {})
    shape = PodShape(gpus=16)
    first = inv.verdict(shape)
    assert first is not None and inv.verdict(shape) is first
    assert inv.verdict(PodShape(gpus=8)) is None
    assert inv.verdict(PodShape(gpus=8), gang=3) is not None  # 2 nodes hold 2 such pods
    assert NodeInventory([], {}).verdict(shape) is None  # nothing listed: nothing said


def test_a_new_inventory_that_gives_the_same_verdicts_agrees_with_the_old() -> None:
    """What lets the evaluator skip re-deriving every waiting workload when a node changes in a way that
    changes no verdict (another node of a size already there, a DRA slice republished)."""
    two = NodeInventory([Node("a", gpus=8), Node("b", gpus=8)], {})
    assert two.verdict(PodShape(gpus=16)) is not None
    three = NodeInventory([Node("a", gpus=8), Node("b", gpus=8), Node("c", gpus=8)], {})
    assert three.agrees_with(two)
    assert two.verdict(PodShape(gpus=8), gang=3) is not None  # now a gang of 3 is asked of the old one
    assert not three.agrees_with(two)  # ... which 3 nodes hold
    big = NodeInventory([Node("a", gpus=16)], {})
    small = NodeInventory([Node("a", gpus=8)], {})
    small.verdict(PodShape(gpus=16))
    assert not big.agrees_with(small)


def test_gpus_a_node_publishes_through_dra_slices_count() -> None:
    inv = NodeInventory([Node("a", gpus=0)], {"a": 16})
    assert inv.verdict(PodShape(gpus=16)) is None


# ---- a ResourceQuota ---------------------------------------------------------------------------------


def refusal(requested: str, used: str, limited: str) -> dict[str, Any]:
    # kube-apiserver's resourcequota admission, wrapped by the Job controller (tests/fixtures/real
    # failedcreate-quota-event.json has the real one).
    msg = (
        'Error creating: pods "train-x" is forbidden: exceeded quota: gpu-quota, requested: '
        f"requests.nvidia.com/gpu={requested}, used: requests.nvidia.com/gpu={used}, limited: "
        f"requests.nvidia.com/gpu={limited}"
    )
    return o.core_event(
        namespace=NS,
        reason="FailedCreate",
        message=msg,
        type_="Warning",
        component="job-controller",
        involved={
            "kind": "Job",
            "namespace": NS,
            "name": "train",
            "uid": o.new_uid("train"),
            "apiVersion": "batch/v1",
        },
        at=T0,
        last=T0 + 300,
        count=5,
    )


def test_a_quota_whose_hard_is_below_one_pods_ask_is_never() -> None:
    st = state_of(
        node("gpu-1"), o.resource_quota(NS, "gpu-quota", hard_gpus=8, used_gpus=0), refusal("16", "0", "8")
    )
    w = only(QueueEvaluator(POLICY), st)
    assert w.state is WorkloadState.QUOTA_BLOCKED
    assert w.never is not None
    assert (
        w.never.text
        == "can never start as configured: asks 16 GPUs per pod, ResourceQuota gpu-quota allows at most 8"
    )
    assert w.never.source == "ResourceQuota gpu-quota"


def test_the_quota_raised_clears_it_before_the_controller_tries_again() -> None:
    ev = QueueEvaluator(POLICY)
    st = state_of(
        node("gpu-1", gpus=16),
        o.resource_quota(NS, "gpu-quota", hard_gpus=8, used_gpus=0),
        refusal("16", "0", "8"),
    )
    assert only(ev, st).never is not None
    apply(st, o.resource_quota(NS, "gpu-quota", hard_gpus=16, used_gpus=0))
    w = only(ev, st, T0 + 660)
    assert w.state is WorkloadState.QUOTA_BLOCKED and w.never is None  # still refused until it tries again


def test_a_quota_used_up_by_others_is_waiting_not_never() -> None:
    st = state_of(node("gpu-1"), refusal("8", "40", "40"))
    w = only(QueueEvaluator(POLICY), st)
    assert w.state is WorkloadState.QUOTA_BLOCKED and w.never is None


def test_an_unreadable_quota_quantity_is_a_counted_skip_not_a_crash() -> None:
    ev = QueueEvaluator(POLICY)
    st = state_of(refusal("sixteen", "0", "8"))
    w = only(ev, st)
    assert w.state is WorkloadState.QUOTA_BLOCKED and w.never is None
    news = ev.odd_news()
    assert [(k, kind, reason) for k, kind, _, reason in news] == [
        (WorkloadKey(NS, "Job", "train"), "ResourceQuota", "never_undecided")
    ]
    assert "requests.nvidia.com/gpu" in news[0][2]
    only(ev, st, T0 + 700)
    assert ev.odd_news() == []  # told once


@pytest.mark.parametrize(
    ("text", "value"),
    [("16", 16), ("64Gi", 64 << 30), ("500m", 0.5), ("1e3", 1000), ("1.5k", 1500), ("x", None), ("", None)],
)
def test_quantities_read_as_kubernetes_writes_them(text: str, value: float | None) -> None:
    got = quantity(text)
    assert (float(got) if got is not None else None) == value


# ---- Kueue --------------------------------------------------------------------------------------------


def kueue_picture(reason: str, message: str) -> ClusterState:
    """The Kueue-shaped pending job (2 pods × 4 GPUs, ClusterQueue team-cq), its Workload's QuotaReserved
    condition set to `reason` and `message` as Kueue v0.20 writes them."""
    items = copy.deepcopy(json.loads((REAL / "kueue-shaped-job-pending.json").read_text())["items"])
    st = state_of(node("gpu-1"), node("gpu-2"))
    for obj in items:
        if obj["kind"] == "Workload":
            obj["status"]["conditions"][0].update(reason=reason, message=message)
        apply(st, obj)
    return st


RESNET = WorkloadKey("vision", "Job", "resnet")
MAX_NOW = (
    "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor default-flavor, "
    "previously considered podsets requests (0) + current podset request (32) > maximum capacity (16)"
)
MAX_OLD = (
    "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor default-flavor, "
    "request > maximum capacity (32 > 16)"
)


@pytest.mark.parametrize(
    ("reason", "message"), [("ExceedsMaxQuota", MAX_NOW), ("Pending", MAX_NOW), ("Pending", MAX_OLD)]
)
def test_kueue_asking_more_than_the_cluster_queue_can_ever_give_is_never(reason: str, message: str) -> None:
    w = only(QueueEvaluator(POLICY), kueue_picture(reason, message))
    assert w.key == RESNET and w.never is not None
    assert (
        w.never.text == "can never start as configured: asks 32 GPUs, ClusterQueue team-cq gives at most 16"
    )
    assert (w.never.reason, w.never.source) == ("kueue_max_quota", "ClusterQueue team-cq")


def test_kueue_exceeds_max_quota_with_an_odd_message_is_still_never_and_the_oddity_counted() -> None:
    ev = QueueEvaluator(POLICY)
    w = only(ev, kueue_picture("ExceedsMaxQuota", "something Kueue never wrote"))
    assert w.never is not None and w.never.reason == "kueue_max_quota"
    assert w.never.asks == "8 GPUs"  # its pod sets' ask, as the Workload says
    assert [(kind, reason) for _, kind, _, reason in ev.odd_news()] == [("Workload", "never_undecided")]


def test_kueue_no_matching_flavor_is_never() -> None:
    msg = "couldn't assign flavors to pod set main: flavor default-flavor doesn't match node affinity"
    w = only(QueueEvaluator(POLICY), kueue_picture("NoMatchingFlavor", msg))
    assert w.never is not None and w.never.reason == "kueue_no_matching_flavor"


@pytest.mark.parametrize(
    ("reason", "message", "words"),
    [
        (
            "WaitingForQuota",
            "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
            "default-flavor, 8 more needed",
            "held by Kueue: waiting for quota in ClusterQueue team-cq, 8 GPUs more needed",
        ),
        (
            "TopologyPlacementFailed",
            "couldn't assign flavors to pod set main: topology \"default\" doesn't allow to fit any of 2 pod(s)",
            "held by Kueue: its topology request cannot be placed in ClusterQueue team-cq now",
        ),
        (
            "WaitingForPreemptedWorkloads",
            "Workload has overlapping preemption targets with another workload, but will fit after these "
            "preemptions complete",
            "held by Kueue: waiting for the workloads it preempted in ClusterQueue team-cq to release their quota",
        ),
        ("Misconfigured", "LocalQueue team doesn't exist", "held by Kueue: its queue is misconfigured"),
        ("Suspended", "ClusterQueue team-cq is inactive", "held by Kueue: its queue is stopped"),
        (
            "PendingEvaluation",
            "Workload is pending evaluation in the scheduling queue",
            "held by Kueue: waiting for Kueue's scheduler to evaluate it in ClusterQueue team-cq",
        ),
        (
            "WaitingForPodsReady",
            "waiting for all admitted workloads to be in PodsReady condition",
            "held by Kueue: waiting for earlier admitted workloads to have all their pods ready",
        ),
    ],
)
def test_every_kueue_reason_is_said_in_watchtowers_words_and_none_of_these_is_never(
    reason: str, message: str, words: str
) -> None:
    w = only(QueueEvaluator(POLICY), kueue_picture(reason, message))
    assert w.never is None
    assert w.why == f"{words} ({message})"


def test_the_older_pending_reason_keeps_its_words() -> None:
    msg = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 8 more needed"
    w = only(QueueEvaluator(POLICY), kueue_picture("Pending", msg))
    assert w.never is None and w.why == f"held by Kueue in ClusterQueue team-cq: {msg}"


# ---- the alert and the JSON ----------------------------------------------------------------------------


def _told(ev: QueueEvaluator, st: ClusterState, alerts: dict, now: float) -> tuple[dict, set[str]]:
    """Return the alerts after evaluating at `now` (rules, lifecycle) and the names of the firing ones that
    are not muted by the default inhibitions: what on-call is told."""
    s = Settings()
    snap = ev.evaluate(st, now=now)
    found = evaluate_rules(
        RuleInput(snapshot=snap, now=now, settings=s.rule_settings(), tiers=s.queue_policy().tiers)
    )
    after, _ = advance(alerts, found, now=now, policy=s.alerting.rules.lifecycle(3600.0))
    mutes = muted(list(after.values()), (), s.alerting.inhibitions(), now=now)
    told = {a.alertname for fp, a in after.items() if a.state is AlertState.FIRING and fp not in mutes}
    return after, told


def test_work_that_can_never_start_is_told_as_never_not_also_as_waiting_until_the_verdict_clears() -> None:
    """Rules, lifecycle and the default inhibitions: a 16-GPU pod on 8-GPU nodes past both its thresholds
    fires its wait alerts (listed, muted) under the never alert; a 16-GPU node clears the verdict and the
    wait alert, firing all along, is what on-call is told, at its real wait."""
    ev = QueueEvaluator(POLICY)
    st = state_of(node("gpu-1"), big_pod())
    alerts: dict = {}
    day = 24 * 3600.0  # past any tier's critical threshold
    for t in (T0 + day, T0 + day + 600):
        alerts, told = _told(ev, st, alerts, t)
    names = {a.alertname for a in alerts.values() if a.state is AlertState.FIRING}
    assert {"WorkloadCanNeverStart", "WorkloadWaitWarning", "WorkloadWaitCritical"} <= names
    assert told == {"WorkloadCanNeverStart"}
    apply(st, node("gpu-big", gpus=16))
    alerts, told = _told(ev, st, alerts, T0 + day + 1200)
    assert "WorkloadCanNeverStart" not in told
    assert told == {"WorkloadWaitCritical"}  # the warning muted by the critical, as for any wait
    crit = next(a for a in alerts.values() if a.alertname == "WorkloadWaitCritical")
    assert crit.annotations["wait_seconds"] == str(round(day + 1200))


def test_work_that_can_never_start_fires_its_alert_at_once_and_says_so_in_json() -> None:
    st = state_of(node("gpu-1"), big_pod())
    snap = QueueEvaluator(POLICY).evaluate(st, now=T0 + 5)  # 5 s of wait: far below any tier's threshold
    s = Settings()
    fired = evaluate_rules(
        RuleInput(snapshot=snap, now=T0 + 5, settings=s.rule_settings(), tiers=s.queue_policy().tiers)
    )
    never = [c for c in fired if c.labels["alertname"] == "WorkloadCanNeverStart"]
    assert len(never) == 1
    c = never[0]
    assert c.labels["reason"] == "node_resources" and c.labels["workload"] == "llm-0"
    assert c.annotations["summary"] == (
        "Pod vision/llm-0 can never start as configured: asks 16 GPUs per pod, the largest schedulable node has 8"
    )
    # At once, even where every other alert waits 5 min first.
    assert LifecyclePolicy(pending_for=300.0).for_of("WorkloadCanNeverStart") == 0.0
    assert (
        LifecyclePolicy(pending_for=300.0, pending_for_by_rule={"WorkloadCanNeverStart": 60.0}).for_of(
            "WorkloadCanNeverStart"
        )
        == 60.0
    )
    d = workload_dict(snap.waiting()[0])
    assert d["never"] == {
        "reason": "node_resources",
        "asks": "16 GPUs per pod",
        "limit": "the largest schedulable node has 8",
        "source": "nodes",
        "text": "can never start as configured: asks 16 GPUs per pod, the largest schedulable node has 8",
    }


# ---- work with no pod yet, in the forms that hold it ------------------------------------------------


def test_a_kueue_held_job_whose_pods_no_node_could_hold_is_never_whatever_kueue_says() -> None:
    """Kueue would admit it once its quota frees, but its 4-GPU pods fit no 2-GPU node."""
    msg = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 8 more needed"
    st = kueue_picture("WaitingForQuota", msg)
    for n in ("gpu-1", "gpu-2"):
        apply(st, node(n, gpus=2))
    w = only(QueueEvaluator(POLICY), st)
    assert w.never is not None
    assert (
        w.never.text
        == "can never start as configured: asks 4 GPUs per pod, the largest schedulable node has 2"
    )


def test_a_paddlejob_with_no_pods_yet_is_weighed_by_what_its_pods_will_ask() -> None:
    job = json.loads((REAL / "paddlejob-pending-no-pods.json").read_text())  # 4 workers of 2 GPUs
    st = state_of(o.priority_class("experiment", 500_000), node("gpu-1", gpus=1), job)
    w = only(QueueEvaluator(POLICY), st)
    assert w.source == "paddlejob" and w.never is not None
    assert (w.never.asks, w.never.limit) == ("2 GPUs per pod", "the largest schedulable node has 1")
