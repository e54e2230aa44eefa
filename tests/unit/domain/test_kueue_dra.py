"""GPUs a Kueue Workload asks through DRA: its pod sets' `resourceClaimTemplateName`s, counted per pod.

A Kueue-held job has no pods, so no claim is made yet: the template its pod set names says what each pod
will ask. Kueue v0.17 counts the same templates (pkg/dra/claims.go GetResourceRequestsForResourceClaimTemplates:
per pod set, ExactCount requests per DeviceClass, mapped to a resource name of its `deviceClassMappings`,
times the pod set's count) when its alpha `DynamicResourceAllocation` gate is on. Objects: the Kueue shapes
of watchtower/simulator/forms/kueue/objects.py and the DRA shapes of forms/dra/objects.py (from the real captures).
"""

from __future__ import annotations

from typing import Any

import orjson

from tests.unit.domain.helpers import NS, POLICY, T0, apply, evaluate
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.domain.forms.dra.tables import DraTables
from watchtower.domain.forms.kueue.records import SOURCE_KUEUE
from watchtower.domain.queue import WorkloadState
from watchtower.domain.state import ClusterState
from watchtower.domain.stuck import stuck_heads
from watchtower.domain.workloads import WorkloadKey
from watchtower.services.queue_json import workload_dict
from watchtower.simulator import objects as o
from watchtower.simulator.forms.dra import objects as d
from watchtower.simulator.forms.kueue import objects as k

# Kueue's name for the GPU DeviceClass in its deviceClassMappings (the KEP's example), told to Watchtower.
WHOLE_GPUS = "whole-gpus"
DEC = ObjectDecoder(kueue_gpu_resources=frozenset({WHOLE_GPUS}))
JOB = WorkloadKey(NS, "Job", "llm")


def feed(st: ClusterState, obj: dict[str, Any], *, deleted: bool = False) -> None:
    b = orjson.dumps(obj)
    kind = obj["kind"]
    if kind == "ResourceClaimTemplate":
        t = DEC.decode("ResourceClaimTemplate", b)
        (st.forms.dra.delete_template if deleted else st.forms.dra.upsert_template)(t)
    elif kind == "ResourceClaim":
        st.forms.dra.upsert_claim(DEC.decode("ResourceClaim", b))
    elif kind == "ResourceSlice":
        st.forms.dra.upsert_slice(DEC.decode("ResourceSlice", b))
    elif kind == "DeviceClass":
        st.forms.dra.upsert_class(DEC.decode("DeviceClass", b))
    elif kind == "ClusterQueue":
        st.forms.kueue.upsert_cluster_queue(DEC.decode("ClusterQueue", b))
    else:
        apply(st, obj, deleted=deleted)


def dra_queue(nominal: int, reserved: int) -> dict[str, Any]:
    """A ClusterQueue whose GPU quota is in Kueue's DRA resource name, not nvidia.com/gpu."""
    cq = k.cluster_queue("team-cq", nominal_gpus=nominal, reserved_gpus=reserved)
    flavor = cq["spec"]["resourceGroups"][0]
    flavor["coveredResources"] = [WHOLE_GPUS]
    flavor["flavors"][0]["resources"][0]["name"] = WHOLE_GPUS
    cq["status"]["flavorsReservation"][0]["resources"][0]["name"] = WHOLE_GPUS
    return cq


def job_and_workload(*, template: str = "gpu-pair", pods: int = 3) -> tuple[dict[str, Any], dict[str, Any]]:
    tpl = o.pod_template(gpus=0, priority_class="batch")
    d.claims_in_template(tpl, template)
    job = o.job(
        name="llm", namespace=NS, created=T0, template=tpl, parallelism=pods, completions=pods, suspend=True
    )
    wl = k.workload(
        job=job,
        queue="team",
        created=T0 + 1,
        pending=(T0 + 2, "couldn't assign flavors to pod set main: insufficient quota"),
    )
    return job, wl


def state(*objs: dict[str, Any], gpu_classes: frozenset[str] = frozenset({d.DRIVER})) -> ClusterState:
    st = ClusterState(dra=DraTables(gpu_classes=gpu_classes))
    base = [
        o.node("gpu-1"),
        d.device_class(T0),
        k.local_queue(NS, "team", "team-cq"),
        dra_queue(16, 16),
    ]
    for obj in (*base, *objs):
        feed(st, obj)
    return st


def test_a_held_workloads_pod_sets_ask_their_templates_gpus_times_their_pods() -> None:
    job, wl = job_and_workload()
    st = state(job, wl, d.claim_template(NS, "gpu-pair", 2, T0))
    (w,) = evaluate(st, T0 + 600).workloads
    assert (w.key, w.state, w.source) == (JOB, WorkloadState.PENDING, SOURCE_KUEUE)
    assert (w.gpus_requested, w.gpus_per_pod) == (6, 2)
    doc = workload_dict(w)
    assert doc["gpus_requested"] == 6
    assert [(c["name"], c["device_class"], c["count"], c["allocated"]) for c in doc["gpu_claims"]] == [
        ("main/gpus", d.DRIVER, 6, False)
    ]


def test_a_template_seen_after_the_workload_or_changed_recounts_it() -> None:
    job, wl = job_and_workload()
    st = state(job, wl)
    # The template is not there yet: nothing says it asks GPUs, so (GPU work only) it is not listed.
    assert evaluate(st, T0 + 600).workloads == ()
    feed(st, d.claim_template(NS, "gpu-pair", 2, T0))
    (w,) = evaluate(st, T0 + 600).workloads
    assert w.gpus_requested == 6
    feed(st, d.claim_template(NS, "gpu-pair", 4, T0))
    (w,) = evaluate(st, T0 + 600).workloads
    assert (w.gpus_requested, w.gpus_per_pod) == (12, 4)
    feed(st, d.claim_template(NS, "gpu-pair", 4, T0), deleted=True)
    assert evaluate(st, T0 + 600).workloads == ()


def test_all_devices_count_what_one_node_offers_and_a_class_not_listed_counts_none() -> None:
    job, wl = job_and_workload(template="whole-node", pods=2)
    tmpl = d.claim_template(NS, "whole-node", 1, T0)
    exactly = tmpl["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    del exactly["count"]
    exactly["allocationMode"] = "All"
    node = o.node("dra-1", gpus=0)
    st = state(job, wl, tmpl, node, d.resource_slice(node, 8, "a1b2c", T0))
    (w,) = evaluate(st, T0 + 600).workloads
    assert (w.gpus_requested, w.gpus_per_pod) == (16, 8)
    # The same objects where that DeviceClass is not a GPU class: nothing GPU about the Workload.
    other = state(job, wl, tmpl, node, d.resource_slice(node, 8, "a1b2c", T0), gpu_classes=frozenset({"x.y"}))
    assert evaluate(other, T0 + 600).workloads == ()


def test_quota_in_kueues_dra_resource_is_gpu_quota_and_free_quota_makes_it_stuck() -> None:
    job, wl = job_and_workload()
    st = state(job, wl, d.claim_template(NS, "gpu-pair", 2, T0))
    assert st.kueue.cluster_queues["team-cq"].nominal_gpus == 16
    now = T0 + 30 * 60
    assert stuck_heads(evaluate(st, now), st, stuck_after=600, selector=POLICY.selector, last_bound={}) == ()
    feed(st, dra_queue(16, 8))  # 8 of its 16 free, and it asks 6 through its claims
    snap = evaluate(st, now)
    (s,) = stuck_heads(snap, st, stuck_after=600, selector=POLICY.selector, last_bound={})
    assert (s.cluster_queue, s.quota_free) == ("team-cq", 8)
    assert "free for its 6" in s.why
