"""Issue 30 part 1 on the real control plane: gated work waits, attributed to whoever holds the gate, and is
released when the gate goes.

- A plain-pod group under Kueue v0.17.0's real controller manager with its pod integration on
  (tests/e2e/kueue/manager.py): Kueue makes one Workload for the group, holds it for quota, and once the
  ClusterQueue has room admits it and removes its gates; the real scheduler then binds the pods. The running
  service (deploy/base/rbac.yaml's read-only token) reports the group as one waiting workload held by Kueue,
  its pods counted as gated, alerted at its tier's threshold, then running.
- A pod behind a gate no known system owns: waiting with the gate named; the gate removed, the scheduler binds it
  and the service reports it running.

No admission webhook is registered (see kueue/manager.py), so the pods are created as Kueue's pod webhook
leaves them (sigs.k8s.io/kueue@v0.17.0 pkg/controller/jobs/pod/pod_webhook.go Default): the label
`kueue.x-k8s.io/managed=true`, the finalizer `kueue.x-k8s.io/managed`, the gate `kueue.x-k8s.io/admission` and,
with TopologyAwareScheduling on (beta, default since v0.14), `kueue.x-k8s.io/topology`. Kueue's reconciler
removes both when it admits a group placed without topology (pod_controller.go ungate).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.api import Api, ApiError, wait_for
from tests.e2e.controlplane.cluster import ControlPlane, tail
from tests.e2e.kueue import objects as k
from tests.e2e.kueue.manager import KueueManager
from tests.e2e.scenario import Scenario, pod_manifest
from tests.e2e.test_service_api import metric, service_watching

pytestmark = pytest.mark.e2e

# sigs.k8s.io/kueue@v0.17.0 pkg/controller/jobs/pod/constants (podconstants) and pkg/controller/constants.
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
GROUP_TOTAL = "kueue.x-k8s.io/pod-group-total-count"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
POD_FINALIZER = "kueue.x-k8s.io/managed"
KUEUE_GATES = ["kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology"]
CUSTOM_GATE = "example.com/dataset-prefetch"

# Where each scenario's service identity lives: one each, since a deleted namespace takes a while to go.
HOME_KUEUE, HOME_GATE = "e2e-gated-kueue-watchtower", "e2e-gated-watchtower"
WARN_AFTER, CRITICAL_AFTER = 3, 6


def _tiers() -> list[dict[str, Any]]:
    """The low tier (class `batch`) alerts within the test; the others keep thresholds far beyond it."""
    far = {"warn_after": "1h", "critical_after": "2h"}
    return [
        {"name": "critical", "min_priority": 1_000_000, "classes": ["urgent-debug"], **far},
        {"name": "high", "min_priority": 900_000, **far},
        {"name": "medium", "min_priority": 500_000, **far},
        {
            "name": "low",
            "min_priority": 0,
            "warn_after": f"{WARN_AFTER}s",
            "critical_after": f"{CRITICAL_AFTER}s",
        },
    ]


def _row(web: httpx.Client, ns: str, name: str, **params: str) -> dict[str, Any] | None:
    doc = web.get("/api/v1/queue", params={"namespace": ns, **params}).json()
    return next((w for w in doc["workloads"] if w["name"] == name), None)


def _group_pod(name: str, *, group: str, total: int, queue: str, gpus: int) -> dict[str, Any]:
    """A pod of a Kueue plain-pod group as Kueue's pod webhook leaves it (module docstring)."""
    pod = pod_manifest(name, gpus=gpus, priority_class="batch", gates=list(KUEUE_GATES))
    meta = pod["metadata"]
    meta["labels"].update({k.QUEUE_LABEL: queue, GROUP_LABEL: group, MANAGED_LABEL: "true"})
    meta["annotations"][GROUP_TOTAL] = str(total)
    meta["finalizers"] = [POD_FINALIZER]
    return pod


def _gates(pod: dict[str, Any]) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


def _kueue_workload(api: Api, ns: str, name: str) -> dict[str, Any] | None:
    try:
        w: dict[str, Any] = api.get(f"{k.ROOT}/namespaces/{ns}/workloads/{name}")
    except ApiError as e:
        if e.status == 404:
            return None
        raise
    return w


@contextlib.contextmanager
def _kueue_queues(api: Api, ns: str, *, gpus: int) -> Iterator[tuple[str, str, str]]:
    """A ResourceFlavor, a ClusterQueue of `gpus` nominal GPUs and a LocalQueue in `ns`; removed afterwards."""
    suffix = ns.rsplit("-", 1)[-1]
    flavor, cq, lq = f"e2e-gpu-{suffix}", f"e2e-cq-{suffix}", "team-queue"
    api.create(f"{k.ROOT}/resourceflavors", k.resource_flavor(flavor))
    api.create(f"{k.ROOT}/clusterqueues", k.cluster_queue(cq, flavor=flavor, gpus=gpus))
    api.create(f"{k.ROOT}/namespaces/{ns}/localqueues", k.local_queue(lq, cluster_queue=cq))
    try:
        wait_for(
            f"ClusterQueue {cq} Active", lambda: k.is_true(api.get(f"{k.ROOT}/clusterqueues/{cq}"), "Active")
        )
        wait_for(
            f"LocalQueue {lq} Active",
            lambda: k.is_true(api.get(f"{k.ROOT}/namespaces/{ns}/localqueues/{lq}"), "Active"),
        )
        yield flavor, cq, lq
    finally:
        # Kueue lifts its pod finalizers as the pods go; one left behind would keep the namespace.
        for p in api.items(f"/api/v1/namespaces/{ns}/pods"):
            with contextlib.suppress(ApiError):
                api.merge_patch(
                    f"/api/v1/namespaces/{ns}/pods/{p['metadata']['name']}",
                    {"metadata": {"finalizers": None}},
                )
        for path in (f"{k.ROOT}/clusterqueues/{cq}", f"{k.ROOT}/resourceflavors/{flavor}"):
            api.delete(path)


def test_a_kueue_pod_group_is_one_waiting_workload_held_by_kueue_then_admitted_and_released(
    scenario: Scenario, control_plane: ControlPlane, kueue: KueueManager
) -> None:
    s, api = scenario, scenario.api
    t0 = time.monotonic()
    # Two nodes of 4 GPUs: the blocker fills one, the other stays free, so only quota holds the group.
    s.node("gpu-kp1", gpus=4)
    s.node("gpu-kp2", gpus=4)
    s.namespace(HOME_KUEUE)
    ns = s.namespace("e2e-kueue-pods", team="research")
    with contextlib.ExitStack() as stack:
        flavor, cq, lq = stack.enter_context(_kueue_queues(api, ns, gpus=4))
        web, hooks = stack.enter_context(
            service_watching(s, control_plane, home=HOME_KUEUE, suffix="-e2e-gated", tiers=_tiers())
        )
        wait_for("/readyz 200", lambda: web.get("/readyz").status_code == 200, timeout=90)
        gated_before = metric(
            web.get("/metrics").text, "watchtower_gated_workloads", tier="low", owner="kueue"
        )

        # ---- the blocker: a one-pod group Kueue admits at once, ungates, and the scheduler runs -------------
        s.pod(ns, _group_pod("blocker-0", group="blocker", total=1, queue=lq, gpus=4))
        wait_for(
            "Kueue admitting group blocker",
            lambda: (w := _kueue_workload(api, ns, "blocker")) is not None and k.is_true(w, "Admitted"),
        )
        s.wait_running(ns, ["blocker-0"])
        assert _gates(s.get_pod(ns, "blocker-0")) == []

        # ---- train: 2 pods x 2 GPUs, gated while the ClusterQueue's 4 GPUs are taken ------------------------
        for i in range(2):
            s.pod(ns, _group_pod(f"train-{i}", group="train", total=2, queue=lq, gpus=2))
        # Wait for the quota's refusal itself, not for any QuotaReserved=False: a refusal in other words before
        # it (the group not yet whole) would fail the check below only when the machine is slow.
        pending = wait_for(
            "Kueue's Workload for group train waiting for quota",
            lambda: (
                (w := _kueue_workload(api, ns, "train")) is not None
                and (c := k.condition(w, "QuotaReserved")) is not None
                and c["status"] == "False"
                and "insufficient unused quota" in c.get("message", "")
                and w
            ),
        )
        reserved = k.condition(pending, "QuotaReserved")
        assert reserved is not None
        # pkg/scheduler/flavorassigner/flavorassigner.go (v0.17.0): the group asks 4 GPUs, none unused.
        assert "insufficient unused quota for nvidia.com/gpu" in reserved["message"], reserved
        assert [ps["count"] for ps in pending["spec"]["podSets"]] == [2]
        for i in range(2):
            pod = s.get_pod(ns, f"train-{i}")
            assert _gates(pod) == KUEUE_GATES
            cond = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
            assert (cond["status"], cond["reason"]) == ("False", "SchedulingGated")

        seen: list[Any] = [None]

        def held() -> dict[str, Any] | None:
            seen[0] = w = _row(web, ns, "train")
            return w if w and w.get("gated") and w.get("kueue") else None

        try:
            w = wait_for("the service reporting group train held by Kueue", held, timeout=30)
        except AssertionError as e:
            raise AssertionError(
                f"{e}\nthe service's row: {seen[0]}\n{tail(s.workdir / 'service.err')}"
            ) from None
        # One workload for the group and its Kueue Workload: its pods gated, its tier, team and GPUs.
        rows = web.get("/api/v1/queue", params={"namespace": ns}).json()["workloads"]
        assert [r["name"] for r in rows if r["name"].startswith("train")] == ["train"], rows
        assert (w["kind"], w["state"], w["tier"], w["team"]) == (
            "KueueWorkload",
            "pending",
            "low",
            "research",
        )
        assert (w["pods_gated"], w["pods_expected"], w["gpus_requested"]) == (2, 2, 4)
        assert w["gated"]["owner"] == "kueue"
        assert sorted(w["gated"]["gates"]) == sorted(KUEUE_GATES)
        assert w["why"].startswith(f"held by Kueue: waiting for quota in ClusterQueue {cq}"), w["why"]
        q = w["kueue"]
        assert (q["workload"], q["local_queue"], q["cluster_queue"], q["admitted"]) == (
            "train",
            lq,
            cq,
            False,
        )
        gauge = metric(web.get("/metrics").text, "watchtower_gated_workloads", tier="low", owner="kueue")
        assert gauge - gated_before >= 1

        # Past its tier's critical threshold while Kueue held it: one alert for the group.
        firing = wait_for(
            "a WorkloadWaitCritical webhook for group train",
            lambda: [
                a
                for a in hooks.alerts("WorkloadWaitCritical", ns, "firing")
                if a["labels"]["workload"] == "train"
            ],
            timeout=CRITICAL_AFTER + 30,
        )
        assert (firing[0]["labels"]["tier"], firing[0]["labels"]["kind"]) == ("low", "KueueWorkload")

        # ---- room: the ClusterQueue gets 8 GPUs; Kueue admits train and removes its gates -------------------
        api.merge_patch(
            f"{k.ROOT}/clusterqueues/{cq}",
            {
                "spec": {
                    "resourceGroups": k.cluster_queue(cq, flavor=flavor, gpus=8)["spec"]["resourceGroups"]
                }
            },
        )
        wait_for(
            "Kueue admitting group train",
            lambda: (w := _kueue_workload(api, ns, "train")) is not None and k.is_true(w, "Admitted"),
        )
        wait_for(
            "train's gates removed by Kueue",
            lambda: all(_gates(s.get_pod(ns, f"train-{i}")) == [] for i in range(2)),
        )
        s.wait_running(ns, ["train-0", "train-1"])
        assert {s.get_pod(ns, f"train-{i}")["spec"]["nodeName"] for i in range(2)} == {"gpu-kp2"}

        def released() -> dict[str, Any] | None:
            r = web.get(f"/api/v1/workloads/{ns}/train", params={"kind": "KueueWorkload"})
            doc = r.json() if r.status_code == 200 else None
            wl = doc["workload"] if doc else None
            return wl if wl and wl["state"] == "running" and wl["pods_running"] == 2 else None

        run = wait_for("the service showing group train running, released", released, timeout=30)
        assert run["pods_gated"] == 0 and run["gated"] is None
        assert run["kueue"]["admitted"] is True
        assert _row(web, ns, "train", state="waiting") is None
        assert kueue.alive(), f"Kueue's manager exited:\n{kueue.tail()}"
    print(f"\nKueue pod-group scenario took {time.monotonic() - t0:.1f}s")


def test_a_pod_behind_a_custom_gate_waits_named_and_is_released_when_the_gate_goes(
    scenario: Scenario, control_plane: ControlPlane
) -> None:
    s, api = scenario, scenario.api
    s.node("gpu-cg1", gpus=4)
    s.namespace(HOME_GATE)
    ns = s.namespace("e2e-custom-gate", team="ranking")
    with service_watching(s, control_plane, home=HOME_GATE, suffix="-e2e-custom-gate", tiers=_tiers()) as (
        web,
        _,
    ):
        wait_for("/readyz 200", lambda: web.get("/readyz").status_code == 200, timeout=90)
        s.pod(ns, pod_manifest("prefetch", gpus=1, priority_class="batch", gates=[CUSTOM_GATE]))

        w = wait_for(
            "the service reporting prefetch held by its gate",
            lambda: (r := _row(web, ns, "prefetch")) and r.get("gated") and r,
            timeout=30,
        )
        assert (w["state"], w["pods_gated"], w["tier"], w["team"]) == ("pending", 1, "low", "ranking")
        assert (w["gated"]["owner"], w["gated"]["gates"]) == ("other", [CUSTOM_GATE])
        assert w["why"].startswith(f"held by scheduling gate {CUSTOM_GATE} since "), w["why"]

        # The controller that holds it lets go: the gate removed, the scheduler binds it, the kubelet runs it.
        api.merge_patch(f"/api/v1/namespaces/{ns}/pods/prefetch", {"spec": {"schedulingGates": None}})
        s.wait_running(ns, ["prefetch"])

        def released() -> dict[str, Any] | None:
            r = web.get(f"/api/v1/workloads/{ns}/prefetch")
            doc = r.json() if r.status_code == 200 else None
            wl = doc["workload"] if doc else None
            return wl if wl and wl["state"] == "running" else None

        run = wait_for("the service showing prefetch running", released, timeout=30)
        assert run["pods_gated"] == 0 and run["gated"] is None
        assert _row(web, ns, "prefetch", state="waiting") is None
