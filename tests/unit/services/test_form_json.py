"""A queue form presents its JSON from its slice: a form registered with `workload_json` and `queue_json`
adds its keys to each workload and its section to the queue document (`analyze` and /api/v1/queue) with
no edit to services/queue_json.py or api/documents.py; the existing forms' keys stay where docs/json.md
lists them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import pytest
from msgspec.structs import replace

from tests.unit.api.conftest import make_service
from watchtower.api.wait_source import read_from
from watchtower.domain.forms import registry
from watchtower.domain.forms.form import QueueForm
from watchtower.domain.queue_values import WorkloadStatus
from watchtower.services.queue_json import snapshot_dict, workload_dict

LANES = "lanes"  # a throwaway form: work waiting in a "lane" the cluster's own controller keeps


def lane_json(w: WorkloadStatus) -> dict[str, Any]:
    return {"lane": w.facts.form_facts.get(LANES)}


def lanes_json(state: Any, now: float) -> dict[str, Any]:
    return {"lanes": [{"name": "fast", "pods": len(state.pods), "at": now}]}


def lane_read_from(doc: Mapping[str, Any]) -> str | None:
    return f"Lane {doc['lane']['lane']}" if doc["source"] == LANES else None


FORM = QueueForm(
    LANES,
    (),
    "work a lane controller holds",
    workload_json=lane_json,
    queue_json=lanes_json,
    read_from=lane_read_from,
)


@pytest.fixture
def with_lanes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "FORMS", (*registry.FORMS, FORM))


async def queue_body() -> dict[str, Any]:
    s = make_service(evaluate=False)
    s.container.queue_tracker.evaluate(s.clock.now())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=s.app), base_url="http://t") as c:
        r = await c.get("/api/v1/queue?limit=100000")
    assert r.status_code == 200
    body: dict[str, Any] = r.json()
    return body


async def test_a_registered_form_adds_its_workload_keys_and_its_section(with_lanes: None) -> None:
    body = await queue_body()
    assert list(body)[-4:] == ["volcano_queues", "dra_problems", "kueue_queues", "lanes"]
    (lanes,) = body["lanes"]
    assert lanes["name"] == "fast" and lanes["pods"] > 0
    w = body["workloads"][0]
    keys = list(w)
    # After the forms before it in the registry, before the quota refusal that ends every workload.
    assert keys[-3:] == ["scheduling_wait_seconds", "lane", "quota"]
    assert w["lane"] is None  # no fact of its form on this workload


async def test_a_forms_facts_are_what_its_workload_json_presents(with_lanes: None) -> None:
    s = make_service()
    w = s.container.queue_tracker.latest.snapshot.workloads[0]
    facts = replace(w.facts, form_facts={LANES: {"lane": "fast", "position": 3}})
    d = workload_dict(replace(w, facts=facts))
    assert d["lane"] == {"lane": "fast", "position": 3}
    assert read_from(d) == "its pods' PodScheduled condition"  # its source is its pods'
    assert read_from({**d, "source": LANES}) == "Lane fast"  # the pages name the form's object


async def test_without_the_form_nothing_of_it_is_shown() -> None:
    body = await queue_body()
    assert "lanes" not in body and "lane" not in body["workloads"][0]
    assert list(body)[-3:] == ["volcano_queues", "dra_problems", "kueue_queues"]


def test_no_form_presents_a_key_another_form_or_the_common_fields_present(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = make_service()
    w = s.container.queue_tracker.latest.snapshot.workloads[0]
    seen: dict[str, str] = {}
    for f in registry.FORMS:
        for key in f.workload_json(w) if f.workload_json is not None else {}:
            assert key not in seen, (key, f.name, seen.get(key))
            seen[key] = f.name
    forms = registry.FORMS
    monkeypatch.setattr(registry, "FORMS", ())
    common = set(workload_dict(w))
    assert not common & set(seen)
    assert "pod_group" not in common and "quota" in common
    monkeypatch.setattr(registry, "FORMS", forms)
    assert set(workload_dict(w)) == common | set(seen)


def test_the_analyze_document_ends_with_the_forms_sections_too(with_lanes: None) -> None:
    tracker = make_service().container.queue_tracker
    tick = tracker.latest
    doc = snapshot_dict(tick.snapshot, tracker.policy.tiers, tracker.state)
    assert list(doc)[-5:] == ["quota", "volcano_queues", "dra_problems", "kueue_queues", "lanes"]
    assert doc["lanes"] == [{"name": "fast", "pods": len(tracker.state.pods), "at": tick.snapshot.at}]


def test_no_form_presents_a_section_another_form_or_the_document_presents(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tracker = make_service().container.queue_tracker
    state, now = tracker.state, tracker.latest.snapshot.at
    seen: dict[str, str] = {}
    for f in registry.FORMS:
        for key in f.queue_json(state, now) if f.queue_json is not None else {}:
            assert key not in seen, (key, f.name, seen.get(key))
            seen[key] = f.name
    monkeypatch.setattr(registry, "FORMS", ())
    common = set(snapshot_dict(tracker.latest.snapshot, tracker.policy.tiers, state))
    assert not common & set(seen) and "quota" in common
