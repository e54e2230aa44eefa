"""Building the Pod record from API JSON: every field lands in its place, repeated parts are shared."""

from __future__ import annotations

import gc

import msgspec
import orjson
import pytest

from watchtower.adapters.kube.decoder import DecodeError, ObjectDecoder
from watchtower.simulator import objects as o

T0 = 1_800_000_000.0


def raw(obj: dict) -> msgspec.Raw:  # type: ignore[type-arg]
    return msgspec.Raw(orjson.dumps(obj))


def full_pod() -> dict:  # type: ignore[type-arg]
    """A pod whose every read field has its own value, so a field put in another's place shows."""
    target = o.condition("DisruptionTarget", "True", T0 + 90, reason="PreemptionByScheduler", message="m2")
    return o.pod(
        name="job-worker-3",
        namespace="team-a",
        created=T0,
        uid="uid-1",
        gpus=2,
        cpu="1500m",
        memory="1Gi",
        priority=500_000,
        priority_class="experiment",
        preemption_policy="Never",
        image="img:1",
        labels={"batch.kubernetes.io/job-name": "job", "unread": "x"},
        annotations={"note": "hello", "other": "y"},
        owner=o.owner_ref("PaddleJob", "job", api_version="batch.paddlepaddle.org/v1", uid="owner-uid"),
        node="gpu-7",
        phase="Running",
        conditions=[o.scheduled(T0 + 5), target],
        start_time=T0 + 6,
        running_since=T0 + 50,
        deletion=T0 + 100,
        nominated_node="gpu-8",
        scheduling_gates=["wait"],
        status_reason="Preempting",
    )


def test_every_field_of_the_record_comes_from_its_own_place_in_the_object() -> None:
    pod = ObjectDecoder(keep_annotations=frozenset({"note"})).decode("Pod", raw(full_pod()))
    assert (pod.uid, pod.namespace, pod.name, pod.created) == ("uid-1", "team-a", "job-worker-3", T0)
    assert (pod.phase, pod.priority, pod.priority_class, pod.preemption_policy) == (
        "Running",
        500_000,
        "experiment",
        "Never",
    )
    assert (pod.gpus, pod.cpu_millis, pod.memory_bytes) == (2, 1500, 2**30)
    assert (pod.node, pod.nominated_node) == ("gpu-7", "gpu-8")
    assert pod.owner is not None and (pod.owner.kind, pod.owner.name, pod.owner.group, pod.owner.uid) == (
        "PaddleJob",
        "job",
        "batch.paddlepaddle.org",
        "owner-uid",
    )
    assert dict(pod.labels) == {"batch.kubernetes.io/job-name": "job"}
    assert dict(pod.annotations) == {"note": "hello"}
    assert pod.images == ("img:1",)
    assert pod.scheduling_gated is True
    assert pod.scheduled is not None and (pod.scheduled.status, pod.scheduled.since) == ("True", T0 + 5)
    assert pod.disruption is not None and (
        pod.disruption.reason,
        pod.disruption.message,
        pod.disruption.since,
    ) == ("PreemptionByScheduler", "m2", T0 + 90)
    assert (pod.start_time, pod.running_since, pod.deleted_at) == (T0 + 6, T0 + 50, T0 + 100)
    assert pod.status_reason == "Preempting"


def test_resource_sums_count_init_containers_and_overhead_per_pod_not_per_cache_entry() -> None:
    dec = ObjectDecoder()
    plain = full_pod()
    with_init = full_pod()
    with_init["spec"]["initContainers"] = [{"name": "fetch", "resources": {"requests": {"cpu": "4"}}}]
    with_overhead = full_pod()
    with_overhead["spec"]["overhead"] = {"cpu": "250m", "memory": "1Gi"}
    two = full_pod()
    two["spec"]["containers"].append({"name": "side", "resources": {"limits": {"nvidia.com/gpu": "1"}}})
    got = [dec.decode("Pod", raw(p)) for p in (plain, with_init, with_overhead, two, plain)]
    assert [(p.gpus, p.cpu_millis, p.memory_bytes) for p in got] == [
        (2, 1500, 2**30),
        (2, 4000, 2**30),  # the largest init container counts when it exceeds the sum
        (2, 1750, 2**31),
        (3, 1500, 2**30),  # a limit alone is the request of an extended resource
        (2, 1500, 2**30),
    ]


def test_unreadable_resources_make_the_pod_a_decode_error_and_do_not_poison_the_next_one() -> None:
    dec = ObjectDecoder()
    for bad_value in ("lots", {"requests": {"cpu": "many"}}, {"requests": {"cpu": "1e999999"}}):
        bad = full_pod()
        bad["spec"]["containers"][0]["resources"] = bad_value
        with pytest.raises(DecodeError):
            dec.decode("Pod", raw(bad))
        assert dec.decode("Pod", raw(full_pod())).cpu_millis == 1500


def test_pods_share_repeated_values_and_are_not_tracked_by_the_garbage_collector() -> None:
    dec = ObjectDecoder()
    a, b = (
        dec.decode("Pod", raw({**full_pod(), "metadata": {**full_pod()["metadata"], "uid": u}})) for u in "ab"
    )
    assert a.uid != b.uid
    assert a.owner is b.owner and a.labels is b.labels and a.namespace is b.namespace and a.node is b.node
    assert not gc.is_tracked(a) and not gc.is_tracked(a.scheduled) and not gc.is_tracked(a.owner)


def test_a_value_repeated_in_another_field_keeps_each_field_its_own_type() -> None:
    dec = ObjectDecoder()
    same = full_pod()
    same["spec"]["containers"][0]["image"] = "team-a"  # also the namespace
    same["spec"]["nodeName"] = "team-a"
    first, second = dec.decode("Pod", raw(same)), dec.decode("Pod", raw(same))
    for pod in (first, second):
        assert (pod.namespace, pod.node, pod.images) == ("team-a", "team-a", ("team-a",))


def test_scheduler_name_is_kept_except_the_default_and_a_non_string_is_a_decode_error() -> None:
    dec = ObjectDecoder()
    # schedulerName: default-scheduler, as admission writes it
    p = o.pod(name="x", namespace="n", created=1e9)
    assert dec.decode("Pod", orjson.dumps(p)).scheduler == ""
    p["spec"]["schedulerName"] = "volcano"
    assert dec.decode("Pod", orjson.dumps(p)).scheduler == "volcano"
    p["spec"]["schedulerName"] = 5
    with pytest.raises(DecodeError, match=r"schedulerName"):
        dec.decode("Pod", orjson.dumps(p))


def test_a_pods_gates_are_read_by_name_and_odd_ones_are_counted_skips_not_crashes() -> None:
    body = o.pod(name="g", namespace="ns", created=T0, scheduling_gates=["kueue.x-k8s.io/admission", "b/x"])
    body["spec"]["schedulingGates"] += [{"name": "Not A Gate!"}, {"name": 7}, {}]
    body["metadata"]["labels"] = {"kueue.x-k8s.io/pod-group-name": "train"}
    body["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": "-3"}
    dec = ObjectDecoder()
    pod = dec.decode("Pod", orjson.dumps(body))
    assert pod.scheduling_gated and pod.gates == ("b/x", "kueue.x-k8s.io/admission")
    assert pod.group_total == 0 and dict(pod.annotations) == {}
    assert dict(pod.labels) == {"kueue.x-k8s.io/pod-group-name": "train"}
    assert dec.read_around["odd_gate"] == 3
    assert dec.read_around["bad_group_total"] == 1
    body["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": "4"}
    assert ObjectDecoder().decode("Pod", orjson.dumps(body)).group_total == 4
