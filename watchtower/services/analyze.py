"""Offline analysis: a `kubectl get ... -A -o json` dump in, the queue out (JSON or a table)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from watchtower.config.model import Settings
from watchtower.domain.kinds import WATCHED
from watchtower.domain.latency import latency_by_tier
from watchtower.domain.queue import QueueEvaluator, QueuePolicy, QueueSnapshot
from watchtower.domain.state import ClusterState
from watchtower.ports import DecodeError, ObjectDecoder

from .alerting import alerts_for_snapshot
from .ingest import Ingestor
from .queue_view import latency_dicts, snapshot_dict


@dataclass
class Analysis:
    state: ClusterState
    snapshot: QueueSnapshot
    ingestor: Ingestor
    ignored_kinds: dict[str, int]


def load_dump(data: bytes, decoder: ObjectDecoder) -> tuple[ClusterState, Ingestor, dict[str, int]]:
    """Return the state a List dump describes; malformed items are skipped and listed."""
    items, _, _ = decoder.decode_list(data)
    kind, _, _ = decoder.head(data)
    if not kind.endswith("List"):
        # A single object or some other JSON would otherwise read as an empty, healthy cluster.
        raise DecodeError(f"expected kind List (kubectl get ... -o json), got {kind or 'no kind'!r}")
    state = ClusterState()
    ing = Ingestor(state, decoder)
    # Applied kind by kind in the table's order (events after the pods they name), so that a dump gives
    # the same answer however kubectl ordered it.
    by_kind: dict[str, list[Any]] = {k.name: [] for k in WATCHED}
    for raw in items:
        try:
            kind, _, _ = decoder.head(raw)
        except DecodeError:
            kind = ""
        if kind in by_kind:
            by_kind[kind].append(raw)
        elif kind == "":
            ing._skip("Unknown", DecodeError("item without a readable kind"))
        else:
            ing.apply(kind, "ADDED", raw)  # counted in ing.ignored
    for kind, raws in by_kind.items():
        for raw in raws:
            ing.apply(kind, "ADDED", raw)
    return state, ing, dict(ing.ignored)


def analyze(data: bytes, *, policy: QueuePolicy, decoder: ObjectDecoder, at: float) -> Analysis:
    state, ing, ignored = load_dump(data, decoder)
    snap = QueueEvaluator(policy).evaluate(state, now=at, include_running=True)
    return Analysis(state, snap, ing, ignored)


def analysis_dict(a: Analysis, policy: QueuePolicy, settings: Settings | None = None) -> dict[str, Any]:
    out = snapshot_dict(a.snapshot, policy.tiers, a.state)
    out["latency"] = latency_dicts(latency_by_tier(a.state.pods.values(), policy.tiers))
    out["skipped"] = [
        {"kind": s.kind, "uid": s.uid or None, "name": s.name or None, "error": s.error}
        for s in a.ingestor.skips
    ]
    out["skipped_total"] = dict(a.ingestor.skipped)
    out["ignored_kinds"] = a.ignored_kinds
    # What would be firing at --at, so a dump can be checked offline (thresholds from `settings`).
    out["alerts"] = alerts_for_snapshot(
        a.snapshot, settings or Settings(), a.snapshot.at, state=a.state, tiers=policy.tiers
    )
    return out
