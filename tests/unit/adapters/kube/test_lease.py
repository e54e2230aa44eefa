"""The Lease on the wire: read tolerantly, written as the API server stores it."""

from __future__ import annotations

import pytest

from watchtower.adapters.kube.lease import lease_object, micro_time, record_of
from watchtower.domain.leader import LeaseRecord

# A Lease as kube-apiserver v1.36 serves it (kubectl get lease -o json), trimmed to what is read.
SERVED = {
    "apiVersion": "coordination.k8s.io/v1",
    "kind": "Lease",
    "metadata": {"name": "watchtower", "namespace": "watchtower", "resourceVersion": "1187"},
    "spec": {
        "acquireTime": "2026-12-02T05:00:01.250000Z",
        "holderIdentity": "watchtower-7d9f-abcde_1a2b3c4d",
        "leaseDurationSeconds": 15,
        "leaseTransitions": 4,
        "renewTime": "2026-12-02T05:03:11.500000Z",
    },
}


def test_a_served_lease_reads_as_its_holder_times_transitions_and_resource_version() -> None:
    r = record_of(SERVED)
    assert r.holder == "watchtower-7d9f-abcde_1a2b3c4d"
    assert (r.duration, r.transitions, r.resource_version) == (15, 4, "1187")
    assert r.renew_time is not None and micro_time(r.renew_time) == "2026-12-02T05:03:11.500000Z"
    assert r.acquire_time is not None and micro_time(r.acquire_time) == "2026-12-02T05:00:01.250000Z"


def test_writing_what_was_read_gives_back_the_same_spec() -> None:
    back = lease_object("watchtower", "watchtower", record_of(SERVED))
    assert back["spec"] == SERVED["spec"]
    assert back["metadata"] == SERVED["metadata"]


def test_a_new_lease_is_written_without_a_resource_version() -> None:
    obj = lease_object("watchtower", "ns", LeaseRecord("a", 15, 1.0, 1.0, 0, ""))
    assert "resourceVersion" not in obj["metadata"]


@pytest.mark.parametrize(
    "spec",
    [
        {},  # a Lease someone created by hand, empty
        {
            "holderIdentity": None,
            "renewTime": "yesterday",
            "leaseTransitions": -3,
            "leaseDurationSeconds": "15",
        },
        {"holderIdentity": 7, "renewTime": 12, "leaseTransitions": True},
    ],
)
def test_a_lease_with_missing_or_malformed_fields_reads_as_free_rather_than_failing(spec: dict) -> None:
    r = record_of({"metadata": {"resourceVersion": "9"}, "spec": spec})
    assert (r.holder, r.renew_time, r.transitions, r.duration) == ("", None, 0, 0)
    assert r.resource_version == "9"


def test_something_that_is_not_an_object_is_an_error_not_a_crash_later() -> None:
    with pytest.raises(ValueError):
        record_of(["not", "a", "lease"])
