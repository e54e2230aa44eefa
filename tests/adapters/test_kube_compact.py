"""Listed pods are cut down before the whole LIST is held: the cut must decode to the very same record."""

from __future__ import annotations

import msgspec
import orjson

from watchtower.adapters.kube_decode import ObjectDecoder
from watchtower.adapters.sim import objects as o

T0 = 1_800_000_000.0


def test_compacted_pod_decodes_to_the_same_record_and_is_smaller() -> None:
    dec = ObjectDecoder(keep_labels=frozenset({"tier"}), keep_annotations=frozenset({"watchtower.io/note"}))
    target = o.condition("DisruptionTarget", "True", T0 + 9, reason="PreemptionByScheduler", message="by x")
    p = o.pod(
        name="w-0",
        namespace="ns",
        created=T0,
        labels={"tier": "gold", "noise": "x" * 500, "batch.kubernetes.io/job-name": "j"},
        annotations={
            "watchtower.io/note": "hello",
            "kubectl.kubernetes.io/last-applied-configuration": "y" * 3000,
        },
        owner=o.owner_ref("PaddleJob", "j", api_version=o.PADDLE_API, uid="ju"),
        node="n1",
        phase="Running",
        conditions=[o.scheduled(T0 + 5), target],
        start_time=T0 + 6,
        running_since=T0 + 30,
        deletion=T0 + 10,
    )
    p["metadata"]["managedFields"] = [{"manager": "m", "fieldsV1": {"f:spec": {}}}] * 20
    raw = msgspec.Raw(orjson.dumps(p))
    small = dec.compact_pod(raw)
    assert dec.pod(small) == dec.pod(raw)
    assert len(small) < len(raw) / 4


def test_unreadable_pod_is_passed_through_for_the_ingestor_to_report() -> None:
    dec = ObjectDecoder()
    raw = msgspec.Raw(b'{"metadata": {"name": 5}}')
    assert bytes(dec.compact_pod(raw)) == bytes(raw)
