"""Grouping pods into workloads (DESIGN §3.10) and tiers (DESIGN §3.13, §4)."""

from __future__ import annotations

import pytest

from tests.unit.domain.helpers import (
    NS,
    T0,
    TIERS,
    evaluate,
    job_owner,
    paddle_owner,
    pending_pod,
    pod,
    state_of,
)
from watchtower.domain.tiers import SYSTEM_PRIORITY_MIN
from watchtower.domain.workloads import WorkloadKey, workload_of
from watchtower.simulator import objects as o


@pytest.mark.parametrize(
    ("kw", "key"),
    [
        ({"owner": paddle_owner("llm"), "labels": {"paddle-res-name": "llm-worker-0"}}, ("PaddleJob", "llm")),
        ({"owner": job_owner("etl")}, ("Job", "etl")),
        (
            {"owner": o.owner_ref("Job", "vj", api_version="batch.volcano.sh/v1alpha1", uid="u")},
            ("VolcanoJob", "vj"),
        ),
        ({"labels": {"volcano.sh/job-name": "vj2"}}, ("VolcanoJob", "vj2")),
        ({"labels": {"batch.kubernetes.io/job-name": "j1"}}, ("Job", "j1")),
        ({"labels": {"job-name": "j2"}}, ("Job", "j2")),
        (
            {"owner": o.owner_ref("ReplicaSet", "web-5d9", api_version="apps/v1", uid="u")},
            ("ReplicaSet", "web-5d9"),
        ),
        # A Deployment's ReplicaSet is `<deployment>-<pod-template-hash>`: the user named the Deployment.
        (
            {
                "owner": o.owner_ref("ReplicaSet", "serve-0010-7d9f8b6c5", api_version="apps/v1", uid="u"),
                "labels": {"pod-template-hash": "7d9f8b6c5"},
            },
            ("Deployment", "serve-0010"),
        ),
        (
            {
                "owner": o.owner_ref("ReplicaSet", "web-5d9", api_version="apps/v1", uid="u"),
                "labels": {"pod-template-hash": "other"},
            },
            ("ReplicaSet", "web-5d9"),
        ),
        ({"owner": o.owner_ref("Node", "gpu-1", api_version="v1", uid="u")}, ("Pod", "llm-worker-0")),
        ({}, ("Pod", "llm-worker-0")),
    ],
)
def test_workload_of_a_pod(kw, key):
    p = pod(o.pod(name="llm-worker-0", namespace=NS, created=T0, **kw))
    assert workload_of(p) == WorkloadKey(NS, *key)


def test_paddle_res_name_label_names_the_pod_not_the_job():
    """A PaddleJob pod without its ownerReference must not be grouped by `paddle-res-name`."""
    objs = [
        pending_pod(
            f"llm-worker-{i}", labels={"paddle-res-name": f"llm-worker-{i}", "paddle-res-type": "worker"}
        )
        for i in range(2)
    ]
    keys = sorted(w.key for w in evaluate(state_of(*objs), T0 + 60).workloads)
    assert keys == [WorkloadKey(NS, "Pod", "llm-worker-0"), WorkloadKey(NS, "Pod", "llm-worker-1")]
    assert "paddle-res-name" not in pod(objs[0]).labels


def test_a_paddlejob_with_eight_workers_is_one_workload():
    owner = paddle_owner("llm")
    objs = [pending_pod(f"llm-worker-{i}", owner=owner, gpus=8) for i in range(8)]
    objs.append(pending_pod("llm-ps-0", owner=owner, gpus=0))
    (w,) = evaluate(state_of(*objs), T0 + 60).workloads
    assert (w.key, w.gang, w.pods_pending, w.gpus_requested) == (
        WorkloadKey(NS, "PaddleJob", "llm"),
        True,
        8,
        64,
    )


def test_same_job_name_in_two_namespaces_is_two_workloads():
    objs = [
        pending_pod("w0", owner=paddle_owner("llm")),
        pending_pod("w0", ns="nlp", owner=paddle_owner("llm")),
    ]
    assert len(evaluate(state_of(*objs), T0 + 60).workloads) == 2


@pytest.mark.parametrize(
    ("priority", "klass", "tier"),
    [
        (1_000_000, "urgent-debug", "critical"),
        (900_000, "online-serving", "high"),
        (500_000, "experiment", "medium"),
        (300_000, "long-training", "low"),
        (100_000, "batch", "low"),
        (0, "", "low"),
        (-5, "", "low"),  # below every minimum: the lowest tier
        (SYSTEM_PRIORITY_MIN, "system-cluster-critical", "critical"),
        (SYSTEM_PRIORITY_MIN + 1000, "system-node-critical", "critical"),
    ],
)
def test_priority_to_tier(priority, klass, tier):
    assert TIERS.tier_of(priority, klass).name == tier


def test_class_names_win_over_values():
    from watchtower.config import settings_from_mapping

    s = settings_from_mapping(
        {
            "tiers": [
                {"name": "critical", "min_priority": 1_000_000, "warn_after": "5m", "critical_after": "15m"},
                {
                    "name": "low",
                    "min_priority": 0,
                    "classes": ["misnamed-urgent"],
                    "warn_after": "2h",
                    "critical_after": "8h",
                },
            ]
        },
        env={},
    )
    assert s.tier_policy().tier_of(5_000_000, "misnamed-urgent").name == "low"
    assert s.tier_policy().tier_of(5_000_000, "other").name == "critical"


def test_workload_takes_the_tier_of_its_highest_priority_pod():
    owner = paddle_owner("llm")
    objs = [pending_pod("a", owner=owner, priority=100_000), pending_pod("b", owner=owner, priority=900_000)]
    (w,) = evaluate(state_of(*objs), T0 + 60).workloads
    assert (w.tier, w.priority) == ("high", 900_000)


def test_the_pods_of_a_deployment_wait_as_one_workload_named_for_the_deployment():
    owner = o.owner_ref("ReplicaSet", "serve-0010-7d9f8b6c5", api_version="apps/v1", uid="rs-1")
    objs = [
        pending_pod(
            f"serve-0010-7d9f8b6c5-{suffix}", owner=owner, labels={"pod-template-hash": "7d9f8b6c5"}, gpus=1
        )
        for suffix in ("x7k2p", "q9m4t")
    ]
    (w,) = evaluate(state_of(*objs), T0 + 60).workloads
    assert (w.key, w.pods_pending, w.gpus_requested) == (WorkloadKey(NS, "Deployment", "serve-0010"), 2, 2)
    assert str(w.key) == "vision/Deployment/serve-0010"


def test_the_template_hash_is_read_into_the_replicaset_owner_and_keeps_label_sets_shared():
    """Memory (DESIGN §8): a hash value per pod template must not give each pod its own label set."""
    rs = o.owner_ref("ReplicaSet", "serve-0010-7d9f8b6c5", api_version="apps/v1", uid="rs-1")
    p = pod(
        o.pod(
            name="serve-0010-7d9f8b6c5-x7k2p",
            namespace=NS,
            created=T0,
            owner=rs,
            labels={"pod-template-hash": "7d9f8b6c5"},
        )
    )
    assert p.owner is not None and p.owner.template_hash == "7d9f8b6c5"
    assert "pod-template-hash" not in p.labels
    pj = paddle_owner("llm")
    a, b = (
        pod(
            o.pod(
                name=f"llm-worker-{i}",
                namespace=NS,
                created=T0,
                owner=pj,
                labels={"job-name": "llm", "pod-template-hash": h},
            )
        )
        for i, h in enumerate(("a1", "b2"))
    )
    assert a.labels is b.labels and a.owner is b.owner
    assert a.owner is not None and a.owner.template_hash == ""  # only a ReplicaSet's hash names anything
