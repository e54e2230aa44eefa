"""A queue form documents its JSON from its slice: a form registered with `workload_shape` and `queue_shape`
(TypedDicts described key by key) has its workload keys and its queue sections in /openapi.json, described,
and the bodies served with them pass the models' check (unknown keys forbidden), with no edit to
api/schemas/. The models are composed per registry, so a changed registry needs no module reloaded."""

from __future__ import annotations

from typing import Any, TypedDict

import httpx
import jsonschema
import pytest

from tests.fixtures.scenario import NOW, demo_cluster
from tests.unit.api.conftest import make_service
from tests.unit.api.test_openapi import check_response
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.api.schemas import Analysis, Queue, Workload
from watchtower.api.schemas.analysis import analysis_model
from watchtower.api.schemas.queue import queue_models
from watchtower.api.schemas.workload import workload_model
from watchtower.config import Settings
from watchtower.domain.forms import registry
from watchtower.domain.forms.form import QueueForm
from watchtower.domain.forms.shapes import Number, Time
from watchtower.domain.queue_values import WorkloadStatus
from watchtower.domain.timefmt import rfc3339
from watchtower.services.analyze import analysis_dict, analyze

LANES = "lanes"  # a throwaway form: work waiting in a "lane" the cluster's own controller keeps


class Lane(TypedDict):
    """The lane a lane controller holds the workload in."""

    name: str
    """the lane"""
    position: int | None
    """its 1-based place in the lane"""
    since: Time | None
    """when it entered the lane"""


class LaneKeys(TypedDict):
    lane: Lane | None
    """its lane; null when no lane holds it"""
    lane_wait_seconds: Number | None
    """how long it has waited in its lane"""


class LaneLine(TypedDict):
    """A lane and what waits in it."""

    name: str
    """the lane"""
    waiting: int
    """workloads in it"""


class LaneSections(TypedDict):
    lanes: list[LaneLine]
    """every lane, whatever the filters"""


def lane_json(w: WorkloadStatus) -> dict[str, Any]:
    # A value on every workload, so that the nested model is checked against values, not only nulls.
    return {
        "lane": {"name": "fast", "position": 1, "since": rfc3339(w.since)},
        "lane_wait_seconds": round(w.wait_seconds, 3),
    }


def lanes_json(state: Any, now: float) -> dict[str, Any]:
    return {"lanes": [{"name": "fast", "waiting": len(state.pods)}]}


FORM = QueueForm(
    LANES,
    (),
    "work a lane controller holds",
    workload_json=lane_json,
    queue_json=lanes_json,
    workload_shape=LaneKeys,
    queue_shape=LaneSections,
)
# The same form without its shapes: its JSON is served, but no model declares it.
UNDECLARED = QueueForm(
    LANES, (), "work a lane controller holds", workload_json=lane_json, queue_json=lanes_json
)


async def served(path: str) -> tuple[dict[str, Any], httpx.Response]:
    """Return /openapi.json and the response to GET `path` of a service built on the registry as it is now."""
    s = make_service(evaluate=False)
    s.container.queue_tracker.evaluate(s.clock.now())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=s.app), base_url="http://t") as c:
        spec = (await c.get("/openapi.json")).json()
        r = await c.get(path)
    assert r.status_code == 200, r.text
    return spec, r


async def test_openapi_json_documents_a_registered_forms_keys_and_sections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry, "FORMS", (*registry.FORMS, FORM))
    spec, _ = await served("/api/v1/queue")
    models = spec["components"]["schemas"]
    workload = models["Workload"]["properties"]
    # Where services/queue_json.py puts them: after the forms before it, before the quota refusal.
    assert list(workload)[-4:] == ["scheduling_wait_seconds", "lane", "lane_wait_seconds", "quota"]
    assert workload["lane"]["description"] == "its lane; null when no lane holds it"
    assert workload["lane_wait_seconds"]["anyOf"] == [{"type": "number"}, {"type": "null"}]
    lane = models["Lane"]
    assert lane["description"] == "The lane a lane controller holds the workload in."
    assert lane["additionalProperties"] is False
    assert lane["properties"]["since"]["anyOf"][0] == {"type": "string", "format": "date-time"}
    assert lane["properties"]["position"]["description"] == "its 1-based place in the lane"
    queue = models["Queue"]["properties"]
    assert list(queue)[-4:] == ["volcano_queues", "dra_problems", "kueue_queues", "lanes"]
    assert queue["lanes"]["description"] == "every lane, whatever the filters"
    assert set(models["LaneLine"]["properties"]) == {"name", "waiting"}


async def test_the_bodies_served_with_a_forms_keys_pass_the_models_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry, "FORMS", (*registry.FORMS, FORM))
    spec, r = await served("/api/v1/queue?limit=100000")
    body = check_response(spec, r)
    assert body["lanes"] and all(w["lane"]["name"] == "fast" for w in body["workloads"])
    w = body["workloads"][0]
    # The workload's own page answers through its model too (FastAPI checks the keys as it answers).
    spec, r = await served(f"/api/v1/workloads/{w['namespace']}/{w['name']}?kind={w['kind']}")
    assert check_response(spec, r)["workload"]["lane"]["name"] == "fast"


async def test_a_forms_keys_no_shape_declares_fail_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "FORMS", (*registry.FORMS, UNDECLARED))
    spec, r = await served("/api/v1/queue?limit=100000")
    with pytest.raises(jsonschema.ValidationError, match="'lane"):
        check_response(spec, r)


def test_the_analyze_document_model_takes_a_forms_keys_and_sections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "FORMS", (*registry.FORMS, FORM))
    settings = Settings()
    decoder = ObjectDecoder(
        team_label=settings.teams.label,
        keep_labels=frozenset(settings.training.match_labels),
        keep_annotations=frozenset(settings.display.annotations),
    )
    doc = analysis_dict(
        analyze(demo_cluster().dump(), policy=settings.queue_policy(), decoder=decoder, at=NOW),
        settings.queue_policy(),
        settings,
    )
    assert doc["lanes"] and doc["workloads"][0]["lane"]
    analysis_model(registry.FORMS).model_validate(doc)
    with pytest.raises(ValueError, match="lanes"):
        Analysis.model_validate(doc)  # the model of the registry without it forbids its keys


def test_the_models_are_composed_once_per_registry_and_the_shipped_ones_are_the_registrys() -> None:
    assert workload_model(registry.FORMS) is Workload
    assert queue_models(registry.FORMS)[0] is Queue
    assert analysis_model(registry.FORMS) is Analysis
    with_lanes = (*registry.FORMS, FORM)
    assert workload_model(with_lanes) is workload_model(with_lanes) is not Workload
    # Every document of a registry holds that registry's one `Workload`, so /openapi.json names it once.
    queue, detail = queue_models(with_lanes)
    assert queue.model_fields["workloads"].annotation == list[workload_model(with_lanes)]
    assert detail.model_fields["workload"].annotation is workload_model(with_lanes)


def test_a_form_declaring_a_key_another_declares_is_refused() -> None:
    clash = QueueForm("clash", (), "a form reusing a common key", workload_shape=ClashKeys)
    with pytest.raises(ValueError, match="'quota'"):
        workload_model((*registry.FORMS, clash))


class ClashKeys(TypedDict):
    quota: str
    """a key the common ones already have"""


async def test_the_composed_models_list_their_keys_in_the_order_the_json_has_them() -> None:
    _, r = await served("/api/v1/queue?limit=100000")
    body = r.json()
    assert list(body) == list(Queue.model_fields)
    assert all(list(w) == list(Workload.model_fields) for w in body["workloads"])
