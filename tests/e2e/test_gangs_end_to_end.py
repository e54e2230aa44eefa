"""Issue 12: gangs and jobs before their pods, against the real API server and scheduler (v1.37.2 with the
gang scheduling gate, see controlplane/cluster.py), with paddle-operator's and Volcano's real CRDs."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from tests.e2e.api import wait_for
from tests.e2e.scenario import FIXTURES, Scenario, pod_manifest, rfc3339
from tests.e2e.workloads import (
    VOLCANO_GROUP_ANNOTATION,
    paddle_pod_name,
    volcano_fit_error,
    volcano_podgroup,
    volcano_queue,
)

# The PodGroup condition the 1.37 scheduler writes (1.36 named it PodGroupScheduled).
SCHEDULED = "PodGroupInitiallyScheduled"

pytestmark = pytest.mark.e2e

# The scheduler's informers see a new pod within milliseconds; PreEnqueue then holds it without a word.
# Long enough that a condition or event, were one written, would be there.
QUIET_SECONDS = 3.0


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def _workload(doc: dict[str, Any], name: str) -> dict[str, Any]:
    found = [w for w in doc["workloads"] if w["name"] == name]
    assert len(found) == 1, (
        f"expected one workload {name}, got {found or [w['name'] for w in doc['workloads']]}"
    )
    return found[0]


def _listed(*objs: dict[str, Any], kind: str = "", api_version: str = "") -> list[dict[str, Any]]:
    return [
        {**o, "kind": kind or o.get("kind"), "apiVersion": api_version or o.get("apiVersion")} for o in objs
    ]


def _fixture_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": "List", "apiVersion": "v1", "items": items}


def test_upstream_gang_waits_silently_until_its_min_count_of_pods_exist_then_schedules_as_one(
    scenario: Scenario,
) -> None:
    s = scenario
    s.node("gpu-k1", gpus=4)
    s.node("gpu-k2", gpus=4)
    ns = s.namespace("e2e-k8s-gang", team="nlp")
    # 1.37's scheduler refuses a pod whose priority differs from its PodGroup's ("all pods in a single pod group
    # should have the same priority as the pod group's priority"): the group names the pods' class.
    workload, _ = s.k8s_gang(ns, "llama", min_count=4, priority_class="experiment")
    for i in range(3):
        s.pod(ns, pod_manifest(f"llama-{i}", gpus=2, priority_class="experiment", group="llama"))
    time.sleep(QUIET_SECONDS)

    pods = s.pods(ns)
    assert len(pods) == 3
    for p in pods:
        # By design (gangscheduling.go PreEnqueue): no PodScheduled condition, no node, no event at all.
        assert p["spec"]["schedulingGroup"] == {"podGroupName": "llama"}
        assert _condition(p, "PodScheduled") is None, p["status"]
        assert p["spec"].get("nodeName") is None
        assert p["status"]["phase"] == "Pending"
    assert s.events(ns) == []
    group = s.k8s_podgroup(ns, "llama")
    assert (group.get("status") or {}).get("conditions") is None
    s.save_fixture(
        "k8s-gang-incomplete",
        _fixture_list(_listed(workload, group) + _listed(*pods, kind="Pod", api_version="v1")),
    )

    # Watchtower's readings are checked at the end, once every fact of the real cluster has been.
    doc = s.analyze("gang-incomplete")

    s.pod(ns, pod_manifest("llama-3", gpus=2, priority_class="experiment", group="llama"))
    s.wait_running(ns, [f"llama-{i}" for i in range(4)])

    def scheduled() -> dict[str, Any] | None:
        pg = s.k8s_podgroup(ns, "llama")
        c = _condition(pg, SCHEDULED)
        return pg if c and c["status"] == "True" else None

    # v1.37.2 writes PodGroupInitiallyScheduled (k8s.io/kubernetes@v1.37.2 pkg/scheduler/schedule_one_podgroup.go),
    # reason Scheduled; v1.36.3 wrote PodGroupScheduled (kept in tests/fixtures/real/k8s-gang-scheduled.json).
    group = wait_for(f"the PodGroup's {SCHEDULED}=True", scheduled)
    cond = _condition(group, SCHEDULED)
    assert cond is not None and cond["reason"] == "Scheduled"
    assert _condition(group, "PodGroupScheduled") is None
    bound = s.pods(ns)
    assert {p["spec"]["nodeName"] for p in bound} == {"gpu-k1", "gpu-k2"}
    s.save_fixture(
        "k8s-gang-scheduled", _fixture_list(_listed(group) + _listed(*bound, kind="Pod", api_version="v1"))
    )

    after = s.analyze("gang-scheduled")

    w = _workload(doc, "llama")
    assert w["state"] == "pending"
    assert w["pods_pending"] == 3
    assert "gang incomplete: 3 of minCount 4 pods exist" in w["why"], w["why"]

    w = _workload(after, "llama")
    assert w["state"] == "running"
    assert w["pods_running"] == 4 and w["pods_pending"] == 0
    assert all(x["state"] not in ("pending", "partial") for x in after["workloads"])


def test_upstream_gang_preempting_low_priority_pods_is_reported_in_the_real_schedulers_words(
    scenario: Scenario,
) -> None:
    s = scenario
    s.node("gpu-w1", gpus=4)
    s.node("gpu-w2", gpus=4)
    low = s.namespace("e2e-gang-preempt-low", team="vision")
    crit = s.namespace("e2e-gang-preempt-crit", team="oncall")
    fillers = [f"filler-{i}" for i in range(4)]
    for name in fillers:
        # Victims checkpoint for a while: the dump below catches them terminating.
        s.pod(low, pod_manifest(name, gpus=2, priority_class="batch", terminate_seconds=6))
    s.wait_running(low, fillers)
    _, group = s.k8s_gang(crit, "urgent", min_count=2, priority_class="urgent-debug")
    for i in range(2):
        s.pod(crit, pod_manifest(f"urgent-{i}", gpus=4, priority_class="urgent-debug", group="urgent"))

    def preempting() -> list[dict[str, Any]] | None:
        victims = [p for p in s.pods(low) if p["metadata"].get("deletionTimestamp")]
        preempted = s.events(low, "Preempted")
        unschedulable = [p for p in s.pods(crit) if _condition(p, "PodScheduled")]
        gang = _condition(s.k8s_podgroup(crit, "urgent"), SCHEDULED)
        if len(victims) == 4 and len(preempted) == 4 and len(unschedulable) == 2 and gang:
            return victims
        return None

    victims = wait_for(
        "four victims terminating, four Preempted events, the gang and its pods Unschedulable", preempting
    )
    preemptors = s.pods(crit)
    pg = s.k8s_podgroup(crit, "urgent")
    preempted = s.events(low, "Preempted")
    messages = {_condition(p, "PodScheduled")["message"] for p in preemptors}  # type: ignore[index]
    # The real wording (v1.37.2), each checked in pkg/scheduler: one pod's cycle finds no node and, the gang
    # preempting as one, adds no preemption verdict of its own (1.36.3 added "no new claims to deallocate,
    # preemption: not eligible due to workload aware preemption enabled"); the other's cycle is refused by
    # the gang plugin (gangscheduling/gangscheduling.go: "minCount (%d) cannot be satisfied: %d scheduled,
    # %d remaining"); the gang cycle fails as a whole (schedule_one_podgroup.go errPodGroupUnschedulable), and
    # the victims name the PodGroup and no node (preemption/executor.go: "Preempted by %s %v on node %v",
    # candidate "cluster").
    assert messages == {
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
        "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining",
    }
    pg_cond = _condition(pg, SCHEDULED)
    assert pg_cond is not None
    assert (pg_cond["status"], pg_cond["reason"], pg_cond["message"]) == (
        "False",
        "Unschedulable",
        # 1.37 writes the gang plugin's status and the pod-group preemption's verdict (1.36.3: "pod group is
        # unschedulable").
        "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining, "
        "pod group preemption: found a placement for podgroup, preempting 4 victims",
    )
    assert {e["message"] for e in preempted} == {
        f"Preempted by podgroup {group['metadata']['uid']} on node cluster"
    }
    for v in victims:
        dt = _condition(v, "DisruptionTarget")
        assert dt is not None
        assert (dt["reason"], dt["message"]) == (
            "PreemptionByScheduler",
            "default-scheduler: preempting to accommodate a higher priority podgroup",
        )
    # 1.37's pod-group preemption nominates each preemptor to the node its victims leave (1.36.3 nominated none).
    nominated = {p["status"].get("nominatedNodeName") for p in preemptors}
    assert nominated <= {v["spec"]["nodeName"] for v in victims}, nominated

    doc = s.analyze("gang-preemption")
    # The victims gone, the gang binds as one.
    s.wait_running(crit, ["urgent-0", "urgent-1"], timeout=60)
    # Every FailedScheduling the gang got on the way (one may say only "pod group is unschedulable", the
    # status of the pod-group cycle, depending on which pod's cycle saw the rejection).
    failed = s.events(crit, "FailedScheduling")
    s.save_fixture(
        "k8s-gang-preemption",
        _fixture_list(
            _listed(pg)
            + _listed(*preemptors, kind="Pod", api_version="v1")
            + _listed(*victims, kind="Pod", api_version="v1")
            + _listed(*failed, *preempted, kind="Event", api_version="v1")
        ),
    )

    by_victim = {p["victim_uid"]: p for p in doc["preemptions"]}
    assert set(by_victim) == {v["metadata"]["uid"] for v in victims}
    for v in victims:
        p = by_victim[v["metadata"]["uid"]]
        assert p["reason"] == "PreemptionByScheduler"
        assert p["victim_tier"] == "low"
        # "on node cluster" names no node: the victim's own node is where the GPUs came from.
        assert p["node"] == v["spec"]["nodeName"]
    w = _workload(doc, "urgent")
    assert w["tier"] == "critical"
    assert w["state"] == "pending"
    assert w["message"] in messages
    # The pod-level suffix is not a verdict: the gang itself is preempting, its victims are terminating.
    assert w["preemption"] == "possible"
    assert "preempt" in w["why"], w["why"]


def test_paddlejob_without_pods_waits_as_its_own_workload_then_is_one_workload_with_its_pods(
    scenario: Scenario,
) -> None:
    s = scenario
    s.node("gpu-p1", gpus=8)
    ns = s.namespace("e2e-paddle", team="ads")
    job = s.paddlejob(ns, "ctr", workers=4, gpus=2, priority_class="urgent-debug")

    def status_pending() -> dict[str, Any] | None:
        j = s.api.get(f"/apis/batch.paddlepaddle.org/v1/namespaces/{ns}/paddlejobs/ctr")
        return j if (j.get("status") or {}).get("phase") == "Pending" else None

    # The operator's first reconcile, with no pods (controllers/paddlejob_helper.go getPaddleJobPhase).
    job = wait_for("the PaddleJob's status Pending", status_pending)
    assert job["status"] == {"phase": "Pending", "mode": "Collective"}
    assert s.pods(ns) == []
    s.save_fixture("paddlejob-no-pods", job)

    doc = s.analyze("paddlejob-no-pods")

    pods = s.paddle_pods(ns, job)
    names = [paddle_pod_name("ctr", "worker", i) for i in range(4)]
    assert [p["metadata"]["name"] for p in pods] == names
    assert all(p["metadata"]["labels"]["paddle-res-name"] == p["metadata"]["name"] for p in pods)
    s.wait_running(ns, names)

    def status_running() -> dict[str, Any] | None:
        j = s.api.get(f"/apis/batch.paddlepaddle.org/v1/namespaces/{ns}/paddlejobs/ctr")
        return j if (j.get("status") or {}).get("phase") == "Running" else None

    job = wait_for("the PaddleJob's status Running", status_running)
    assert job["status"]["worker"]["running"] == 4
    s.save_fixture(
        "paddlejob-with-pods",
        _fixture_list(_listed(job) + _listed(*s.pods(ns), kind="Pod", api_version="v1")),
    )

    after = s.analyze("paddlejob-with-pods")

    w = _workload(doc, "ctr")
    assert w["kind"] == "PaddleJob"
    assert w["state"] == "pending"
    assert w["tier"] == "critical"  # the template's priorityClassName
    assert w["gpus_requested"] == 8
    assert "no pods created yet" in w["why"], w["why"]

    assert [(w["kind"], w["name"]) for w in after["workloads"]] == [("PaddleJob", "ctr")]
    w = after["workloads"][0]
    assert w["state"] == "running"
    assert w["pods_running"] == 4


def test_volcano_podgroup_pending_in_its_queue_waits_with_volcanos_message(scenario: Scenario) -> None:
    s = scenario
    s.node("gpu-vc1", gpus=8)
    ns = s.namespace("e2e-volcano", team="search")
    at = rfc3339(time.time())
    # The picture Volcano's real scheduler left (capture_volcano.py): a gang of 4 × 2 GPUs in a queue capped
    # at 4 GPUs stays Pending; no Volcano runs here, so the test writes what it wrote.
    real = json.loads((FIXTURES / "volcano-real-podgroup-pending.json").read_text())["items"]
    real_group = next(o for o in real if o["kind"] == "PodGroup")
    real_pod = next(o for o in real if o["kind"] == "Pod")
    queue = s.volcano_queue(
        volcano_queue(
            "e2e-search",
            weight=1,
            capability={"nvidia.com/gpu": "4", "cpu": "64", "memory": "512Gi"},
            deserved={"nvidia.com/gpu": "4"},
            guarantee={"nvidia.com/gpu": "0"},
        ),
        {"state": "Open", "allocated": {"cpu": "0", "memory": "0"}, "reservation": {}},
    )
    group = s.volcano_podgroup(
        ns,
        volcano_podgroup(
            "vc-rank",
            min_member=4,
            queue="e2e-search",
            priority_class="experiment",
            min_resources={"nvidia.com/gpu": "8", "cpu": "4", "memory": "4Gi"},
            pending=4,
            transition_id=str(uuid.uuid4()),
            at=at,
        ),
    )
    cond = group["status"]["conditions"][0]
    real_cond = real_group["status"]["conditions"][0]
    assert {k: cond[k] for k in ("type", "status", "reason", "message")} == {
        k: real_cond[k] for k in ("type", "status", "reason", "message")
    }
    assert cond["message"] == (
        "4/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; "
        "Pending: 4 Unschedulable"
    )
    pod_message = volcano_fit_error(pending=4, min_available=4)
    assert pod_message == _condition(real_pod, "PodScheduled")["message"]  # type: ignore[index]
    pods = []
    for i in range(4):
        m = pod_manifest(f"vc-rank-{i}", gpus=2, priority_class="experiment")
        # Volcano's pods name their group and scheduler (paddle-operator paddlejob_controller.go createPod);
        # no kube-scheduler profile serves "volcano", so only the test writes their condition.
        m["spec"]["schedulerName"] = "volcano"
        m["metadata"]["annotations"][VOLCANO_GROUP_ANNOTATION] = "vc-rank"
        s.pod(ns, m)
        # Volcano's cache writes its FitError on each pending task (pkg/scheduler/cache/cache.go
        # RecordJobStatusEvent → taskUnschedulable).
        pods.append(
            s.api.patch_status(
                f"/api/v1/namespaces/{ns}/pods/vc-rank-{i}",
                {
                    "status": {
                        "conditions": [
                            {
                                "type": "PodScheduled",
                                "status": "False",
                                "reason": "Unschedulable",
                                "message": pod_message,
                                "lastTransitionTime": at,
                            }
                        ]
                    }
                },
            )
        )
    assert all(p["spec"].get("nodeName") is None for p in s.pods(ns))
    s.save_fixture(
        "volcano-podgroup-pending",
        _fixture_list(_listed(queue, group) + _listed(*pods, kind="Pod", api_version="v1")),
    )

    doc = s.analyze("volcano-pending")

    w = _workload(doc, "vc-rank")
    assert w["state"] == "pending"
    assert w["pods_pending"] == 4
    assert w["tier"] == "medium"  # experiment, the PodGroup's and its pods' class
    # Volcano's own words stay in `message`; `why` says them plainly.
    assert "pod group is not ready, 4 Pending, 4 minAvailable" in w["message"], w["message"]
    assert w["why"] == (
        "its gang cannot be placed: the scheduler cannot fit the minimum of 4 pods together (only 0 placed)"
    )
    assert (w["source"], w["pod_group"], w["pods_expected"]) == ("volcano-podgroup", "vc-rank", 4)
    assert not any(x["name"].startswith("vc-rank-") for x in doc["workloads"])
