"""Every watched kind reaches the state; an object of a kind nobody reads is counted and logged once."""

from __future__ import annotations

import logging

import msgspec
import orjson
import pytest

from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.commands.demo.warm import demo_cluster
from watchtower.config.model import SimulatorConfig
from watchtower.domain.state import ClusterState
from watchtower.services.ingest import Ingestor
from watchtower.simulator.cluster import KINDS

# PaddleJobs are read now (a quota-refused one's tier is in its template); StatefulSets are not.
UNREAD = {
    "apiVersion": "apps/v1",
    "kind": "StatefulSet",
    "metadata": {"name": "db", "namespace": "team-a", "uid": "sts-1"},
}


def raw(obj: dict) -> msgspec.Raw:  # type: ignore[type-arg]
    return msgspec.Raw(orjson.dumps(obj))


def test_objects_of_a_kind_nobody_reads_are_counted_per_kind_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="watchtower.services.ingest")
    ing = Ingestor(ClusterState(), ObjectDecoder())
    assert ing.list_page("StatefulSet", [raw(UNREAD), raw(UNREAD)]) == []
    assert ing.apply("StatefulSet", "MODIFIED", raw(UNREAD)) == []
    assert ing.apply("ConfigMap", "ADDED", raw({"kind": "ConfigMap", "metadata": {"name": "c"}})) == []
    assert ing.ignored == {"StatefulSet": 3, "ConfigMap": 1}
    assert not ing.skipped and not ing.skips
    logged = [r.getMessage() for r in caplog.records]
    assert sum("StatefulSet" in m for m in logged) == 1 and sum("ConfigMap" in m for m in logged) == 1


def test_every_kind_the_simulator_serves_reaches_the_state() -> None:
    sim = demo_cluster(SimulatorConfig(seed=3))
    sim.step(600)
    state = ClusterState()
    ing = Ingestor(state, ObjectDecoder())
    for kind in KINDS:
        ing.list_page(kind, [msgspec.Raw(b) for b in sim.list_objects(kind)])
    for kind, type_, b in sim.drain():
        ing.apply(kind, type_, b)
    assert not ing.ignored and not ing.skipped
    assert state.namespaces and state.priority_classes and state.nodes and state.control.quotas and state.pods
    assert all(state.control.controllers_of(k) for k in ("Job", "ReplicaSet", "PaddleJob"))
