"""Offline analysis: a `kubectl get ... -A -o json` dump in, the queue out (JSON or a table)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from watchtower.config.model import Settings
from watchtower.domain.estimate import ScheduleHistory
from watchtower.domain.forms.dra.records import GPU_DEVICE_CLASS
from watchtower.domain.forms.dra.tables import DraTables
from watchtower.domain.forms.registry import WATCHED, kind_named
from watchtower.domain.latency import latency_by_tier
from watchtower.domain.queue import QueueEvaluator, QueuePolicy, QueueSnapshot
from watchtower.domain.state import ClusterState
from watchtower.domain.stuck import stuck_heads
from watchtower.ports import DecodeError, ObjectDecoder

from .alerting import alerts_for_snapshot
from .ingest import Ingestor
from .queue_json import latency_dicts, snapshot_dict

# How far --at may be from the dump's own time before the command warns that waits will look wrong.
FAR_FROM_DUMP = 3600.0


@dataclass
class Analysis:
    state: ClusterState
    snapshot: QueueSnapshot
    ingestor: Ingestor
    ignored_kinds: dict[str, int]
    at_source: str = "option"  # "option" (--at), "dump" (its newest time) or "now" (a dump with no time)
    dump_time: float | None = None  # the newest time the dump holds


def dump_time(state: ClusterState) -> float | None:
    """Return the newest time a dump holds: creations, conditions' lastTransitionTime, container starts
    and the events' times (quota refusals, preemptions); None for a dump without any."""
    newest: float | None = None

    def see(t: float | None) -> None:
        nonlocal newest
        if t is not None and (newest is None or t > newest):
            newest = t

    for p in state.pods.values():
        see(p.created)
        see(p.start_time)
        see(p.running_since)
        for c in (p.scheduled, p.disruption):
            if c is not None:
                see(c.since)
    for q in state.control.quota_refusals.values():
        see(q.first)
        see(q.last)
    for pre in state.ledger.preemptions.values():
        see(pre.at)
    for d in state.ledger.disruptions.values():
        see(d.at)
    return newest


def load_dump(
    data: bytes, decoder: ObjectDecoder, *, gpu_classes: frozenset[str] = frozenset({GPU_DEVICE_CLASS})
) -> tuple[ClusterState, Ingestor, dict[str, int]]:
    """Return the state a List dump describes; malformed items are skipped and listed."""
    items, _, _ = decoder.decode_list(data)
    kind, _, _ = decoder.head(data)
    if not kind.endswith("List"):
        # A single object or some other JSON would otherwise read as an empty, healthy cluster.
        raise DecodeError(f"expected kind List (kubectl get ... -o json), got {kind or 'no kind'!r}")
    state = ClusterState(dra=DraTables(gpu_classes=gpu_classes))
    ing = Ingestor(state, decoder)
    # Applied kind by kind in the table's order (events after the pods they name), so that a dump gives
    # the same answer however kubectl ordered it.
    by_kind: dict[str, list[Any]] = {k.name: [] for k in WATCHED}
    for raw in items:
        try:
            kind = kind_named(*decoder.type_of(raw))  # Volcano's PodGroup is not upstream's
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


def analyze(
    data: bytes,
    *,
    policy: QueuePolicy,
    decoder: ObjectDecoder,
    at: float | None,
    now: float = 0.0,
    gpu_classes: frozenset[str] = frozenset({GPU_DEVICE_CLASS}),
) -> Analysis:
    """Return the queue the dump describes as of `at`; None: as of the dump's newest time (else `now`).

    A dump is a picture taken at some moment: read at another time, every wait is off by the difference
    (and refusals fall out of their window), hence its own time by default.
    """
    state, ing, ignored = load_dump(data, decoder, gpu_classes=gpu_classes)
    taken = dump_time(state)
    source = "option"
    if at is None:
        at, source = (taken, "dump") if taken is not None else (now, "now")
    # What the dump shows of each preemptor (bound, or still waiting past the window) decides its outcome.
    state.ledger.settle(at, policy.preemption_outcome_window)
    snap = QueueEvaluator(policy).evaluate(state, now=at, include_running=True)
    return Analysis(state, snap, ing, ignored, source, taken)


def analysis_dict(a: Analysis, policy: QueuePolicy, settings: Settings | None = None) -> dict[str, Any]:
    q = (settings or Settings()).queue
    # The dump's own bindings within the window are the history, as the service's first list is.
    history = ScheduleHistory(window=q.estimate_window, min_samples=q.estimate_min_samples)
    matches, tiers = policy.selector.matches, policy.tiers
    history.seed(
        (p for p in a.state.pods.values() if matches(p)),
        tier_of=lambda p: tiers.tier_of(p.priority, p.priority_class).name,
        now=a.snapshot.at,
    )
    stuck = stuck_heads(
        a.snapshot,
        a.state,
        stuck_after=q.stuck_after,
        selector=policy.selector,
        last_bound=history.last_bound,
    )
    waits = history.waits(a.snapshot.at)
    out = snapshot_dict(a.snapshot, policy.tiers, a.state, waits=waits, stuck=stuck)
    out["at_source"] = a.at_source
    out["latency"] = latency_dicts(latency_by_tier(a.state.pods.values(), policy.tiers))
    out["skipped"] = [
        {"kind": s.kind, "uid": s.uid or None, "name": s.name or None, "error": s.error}
        for s in a.ingestor.skips
    ]
    out["skipped_total"] = dict(a.ingestor.skipped)
    out["ignored_kinds"] = a.ignored_kinds
    # What would be firing at --at, so a dump can be checked offline (thresholds from `settings`).
    out["alerts"] = alerts_for_snapshot(
        a.snapshot,
        settings or Settings(),
        a.snapshot.at,
        state=a.state,
        tiers=policy.tiers,
        stuck=stuck,
        waits=waits,
    )
    return out
