"""The queue documents make each workload's JSON when a response first needs it (issue 34): the bodies must be
byte for byte those of making every workload's JSON up front, as the API did before, for every filter."""

from __future__ import annotations

import itertools

import orjson

from tests.unit.api.conftest import make_service
from watchtower.api.documents import QueueDocuments
from watchtower.services.queue_json import SCHEMA_VERSION, rfc3339, workload_dict


def eager_body(
    docs: QueueDocuments,
    tier_names: list[str],
    *,
    tiers=(),
    namespaces=(),
    teams=(),
    states=(),
    offset=0,
    limit=100,
):
    """The body as the documents built it before: every workload presented, sorted, then filtered."""
    tick = docs.tick
    stuck = {s.status.key: s for s in tick.stuck}
    ranks = {name: i for i, name in enumerate(tier_names)}
    order = sorted(
        tick.snapshot.workloads,
        key=lambda w: (ranks.get(w.tier, len(ranks)), not w.waiting, -w.wait_seconds, w.namespace, w.name),
    )
    picked = [
        orjson.dumps(workload_dict(w, tick.waits.estimate(w) if tick.waits else None, stuck.get(w.key)))
        for w in order
        if (not tiers or w.tier in tiers)
        and (not namespaces or w.namespace in namespaces)
        and (not teams or w.team in teams)
        and (not states or w.state.value in states)
    ]
    page = picked[offset : offset + limit]
    head = orjson.dumps(
        {
            "schema_version": SCHEMA_VERSION,
            "at": rfc3339(tick.snapshot.at),
            "total": len(picked),
            "offset": offset,
            "count": len(page),
        }
    )
    sections = b"".join(
        b"," + orjson.dumps(k) + b":" + orjson.dumps(v) for k, v in tick.form_sections.items()
    )
    return head[:-1] + b',"workloads":[' + b",".join(page) + b"]" + sections + b"}"


def test_every_filter_and_page_answers_the_same_bytes_as_presenting_every_workload_first() -> None:
    s = make_service()
    tick = s.container.queue_tracker.latest
    assert tick is not None
    tiers = s.container.queue_tracker.policy.tiers
    names = [t.name for t in tiers.tiers]
    ws = tick.snapshot.workloads
    assert len(ws) >= 5
    some = {
        "tiers": [frozenset(), frozenset({ws[0].tier}), frozenset({t.name for t in tiers.tiers[:2]})],
        "namespaces": [frozenset(), frozenset({ws[-1].namespace})],
        "teams": [frozenset(), frozenset({ws[1].team})],
        "states": [frozenset(), frozenset({"pending"}), frozenset({"pending", "partial", "running"})],
    }
    pages = [(0, 100), (0, 2), (3, 2), (1000, 5)]
    checked = 0
    for (tf, nf, mf, sf), (offset, limit) in itertools.product(itertools.product(*some.values()), pages):
        docs = QueueDocuments(tick, tiers)  # a fresh one each time: no row made by an earlier query
        got = docs.queue_json(tiers=tf, namespaces=nf, teams=mf, states=sf, offset=offset, limit=limit)
        want = eager_body(
            docs, names, tiers=tf, namespaces=nf, teams=mf, states=sf, offset=offset, limit=limit
        )
        assert got == want, (tf, nf, mf, sf, offset, limit)
        checked += orjson.loads(got)["count"]
    assert checked > 50
    # A lookup by name answers the same documents as the page does.
    docs = QueueDocuments(tick, tiers)
    w = ws[0]
    [row] = [r for r in docs.find(w.namespace, w.name) if r.kind == w.kind]
    assert row.doc == orjson.loads(
        orjson.dumps(
            workload_dict(
                w,
                tick.waits.estimate(w) if tick.waits else None,
                {x.status.key: x for x in tick.stuck}.get(w.key),
            )
        )
    )
