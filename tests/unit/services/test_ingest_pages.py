"""A LIST applied page by page: each page lands at once, the objects no page listed go at the last page."""

from __future__ import annotations

import msgspec
import orjson
import pytest

from watchtower.adapters.kube.decoder import DecodeError, ObjectDecoder
from watchtower.domain.state import ClusterState
from watchtower.services.ingest import Ingestor
from watchtower.simulator import objects as o

T0 = 1_800_000_000.0


def pod(i: int) -> msgspec.Raw:
    return msgspec.Raw(orjson.dumps(o.pod(name=f"p-{i}", namespace="team-a", created=T0 + i, uid=f"u{i}")))


def raws(*objs: dict) -> list[msgspec.Raw]:  # type: ignore[type-arg]
    return [msgspec.Raw(orjson.dumps(x)) for x in objs]


def ingestor_with_pods(*ids: int) -> Ingestor:
    ing = Ingestor(ClusterState(), ObjectDecoder())
    ing.list_page("Pod", [pod(i) for i in ids])
    return ing


def test_a_relist_in_pages_drops_only_the_pods_no_page_listed() -> None:
    ing = ingestor_with_pods(1, 2, 3)
    ing.list_page("Pod", [pod(1)], first=True, last=False)
    ing.list_page("Pod", [pod(3), pod(4)], first=False, last=True)
    assert set(ing.state.pods) == {"u1", "u3", "u4"}


def test_nothing_is_dropped_before_the_last_page() -> None:
    ing = ingestor_with_pods(1, 2)
    ing.list_page("Pod", [pod(1)], first=True, last=False)
    assert set(ing.state.pods) == {"u1", "u2"}
    ing.list_page("Pod", [pod(3)], first=False, last=False)
    assert set(ing.state.pods) == {"u1", "u2", "u3"}


def test_a_list_started_over_drops_what_only_the_abandoned_attempt_listed() -> None:
    # A continue token expired mid-list: the source lists again from the first page.
    ing = ingestor_with_pods(1)
    ing.list_page("Pod", [pod(1), pod(2)], first=True, last=False)
    ing.list_page("Pod", [pod(1)], first=True, last=True)
    assert set(ing.state.pods) == {"u1"}


def test_a_relist_in_pages_drops_unlisted_nodes_quotas_and_priority_classes() -> None:
    ing = Ingestor(ClusterState(), ObjectDecoder())
    ing.list_page("Node", raws(o.node("a"), o.node("b")))
    ing.list_page(
        "ResourceQuota", raws(*(o.resource_quota(ns, "gpu", hard_gpus=8, used_gpus=0) for ns in "xy"))
    )
    ing.list_page("PriorityClass", raws(o.priority_class("hi", 1000), o.priority_class("lo", 1)))

    ing.list_page("Node", raws(o.node("b")), first=True, last=False)
    ing.list_page("Node", raws(o.node("c")), first=False, last=True)
    ing.list_page("ResourceQuota", raws(o.resource_quota("y", "gpu", hard_gpus=8, used_gpus=1)), last=True)
    ing.list_page("PriorityClass", [], first=True, last=False)
    ing.list_page("PriorityClass", raws(o.priority_class("hi", 1000)), first=False, last=True)

    st = ing.state
    assert set(st.nodes) == {"b", "c"}
    assert set(st.control.quotas) == {("y", "gpu")} and st.control.quotas[("y", "gpu")].used_gpus == 1
    assert set(st.priority_classes) == {"hi"}


def test_a_malformed_listed_pod_is_skipped_and_counted_and_the_page_goes_on() -> None:
    ing = ingestor_with_pods()
    bad = o.pod(name="bad", namespace="team-a", created=T0, uid="ubad")
    bad["metadata"]["creationTimestamp"] = "yesterday"
    ing.list_page("Pod", [pod(1), msgspec.Raw(orjson.dumps(bad)), pod(2)], first=True, last=True)
    assert set(ing.state.pods) == {"u1", "u2"}
    assert ing.skipped["Pod"] == 1


def test_a_relisted_pod_that_became_malformed_is_dropped() -> None:
    ing = ingestor_with_pods(1, 2)
    bad = o.pod(name="p-2", namespace="team-a", created=T0 + 2, uid="u2")
    bad["spec"]["containers"][0]["resources"] = "lots"
    ing.list_page("Pod", [pod(1), msgspec.Raw(orjson.dumps(bad))], first=True, last=True)
    assert set(ing.state.pods) == {"u1"}
    assert ing.skipped["Pod"] == 1


def page_body(*items: bytes, cont: str = "") -> bytes:
    meta = {"resourceVersion": "7", **({"continue": cont} if cont else {})}
    return (
        b'{"kind":"PodList","apiVersion":"v1","metadata":'
        + orjson.dumps(meta)
        + b',"items":['
        + b",".join(items)
        + b"]}"
    )


def test_a_list_page_is_read_from_its_head_and_its_pods_in_one_pass() -> None:
    ing = ingestor_with_pods()
    page, rv, cont = ing.decoder.list_page(page_body(bytes(pod(1)), bytes(pod(2)), cont="next"))
    assert (rv, cont) == ("7", "next")
    ing.list_page("Pod", page, first=True, last=True)
    assert set(ing.state.pods) == {"u1", "u2"}
    assert page.unsplit and len(page) == 2  # counted by the one-pass decode, never split


def test_a_page_with_a_pod_of_the_wrong_shape_keeps_the_others_and_counts_the_bad_one() -> None:
    ing = ingestor_with_pods()
    odd = o.pod(name="odd", namespace="team-a", created=T0, uid="uodd")
    odd["spec"]["priority"] = "high"  # fails the typed decode of the whole page
    page, _, _ = ing.decoder.list_page(page_body(bytes(pod(1)), orjson.dumps(odd), bytes(pod(2))))
    ing.list_page("Pod", page, first=True, last=True)
    assert set(ing.state.pods) == {"u1", "u2"}
    assert ing.skipped["Pod"] == 1


def test_an_unreadable_page_raises_and_drops_nothing() -> None:
    ing = ingestor_with_pods(1, 2)
    page, _, _ = ing.decoder.list_page(page_body(bytes(pod(1)), bytes(pod(3)))[:-40])  # truncated
    with pytest.raises(DecodeError):
        ing.list_page("Pod", page, first=True, last=True)
    assert set(ing.state.pods) == {"u1", "u2"}


def test_a_body_whose_items_come_before_its_metadata_is_read_whole() -> None:
    dec = ObjectDecoder()
    body = b'{"items":[' + bytes(pod(1)) + b'],"metadata":{"resourceVersion":"9","continue":"c"}}'
    page, rv, cont = dec.list_page(body)
    assert (rv, cont, len(page)) == ("9", "c", 1)
