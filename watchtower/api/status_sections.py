"""The status page as plain data: what each section shows, in the users' words."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from watchtower.domain.alerts.integration import IntegrationId
from watchtower.domain.alerts.payload import title
from watchtower.domain.alerts.rules.base import workload_path
from watchtower.domain.health import SourceHealth
from watchtower.domain.messages.scheduler import PreemptionVerdict, preemption_note
from watchtower.domain.tick import Tick
from watchtower.domain.timefmt import format_duration
from watchtower.ports import AlertStore
from watchtower.services.alerting import AlertAdmin
from watchtower.services.feeds import Readiness
from watchtower.services.queue_json import rfc3339

from .documents import QueueDocuments
from .wait_source import PLAIN_SOURCES, kueue_place, pods_exist, read_from

ROWS_PER_TIER = 100
PREEMPTIONS_SHOWN = 30

STATE_WORDS = {
    "pending": "pending",
    "partial": "partial gang",
    "quota_blocked": "refused by quota",
    "gated": "gated",
    "running": "running",
}


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return format_duration(max(0.0, seconds))


def _verdict(why: str, verdict: str) -> str:
    # An unknown verdict is not worth a line on a crowded page.
    v = PreemptionVerdict(verdict)
    return "" if v is PreemptionVerdict.UNKNOWN else preemption_note(why, v)


def _row(doc: dict[str, Any]) -> dict[str, Any]:
    wait, warn, crit = doc["wait_seconds"], doc["warn_after_seconds"], doc["critical_after_seconds"]
    scale = crit if crit > 0 else max(wait, 1.0)
    return {
        "namespace": doc["namespace"],
        "name": doc["name"],
        "kind": doc["kind"],
        "team": doc["team"],
        "state": STATE_WORDS.get(doc["state"], doc["state"]),
        "wait": format_duration(wait),
        "warn": format_duration(warn),
        "critical": format_duration(crit),
        "bar_pct": round(min(100.0, 100.0 * wait / scale), 1),
        "warn_pct": round(min(100.0, 100.0 * warn / scale), 1),
        "severity": doc["severity"] or "ok",
        "why": doc["why"] or "",
        "verdict": _verdict(doc["why"] or "", doc["preemption"]),
        "gpus": doc["gpus_requested"],
        "dra": bool(doc["gpu_claims"]),
        "gpus_held": doc["gpus_held"],
        "pods": f"{doc['pods_running']}/{doc['pods_running'] + doc['pods_pending']}",
        "ahead_higher_tier": doc["ahead_higher_tier"],
        "position": doc["position_in_tier"],
        "kueue_place": kueue_place(doc),
        "estimate": (doc["start_estimate"] or {}).get("text", ""),
        "stuck": (doc["stuck_despite_capacity"] or {}).get("why", ""),
        "never": bool(doc.get("never")),  # can never start as configured: `why` says why
        "preempted_recently": doc["preemptions_recent"],
        "annotations": sorted(doc["annotations"].items()),
        "read_from": "" if doc["source"] in PLAIN_SOURCES else read_from(doc),
        "pods_exist": pods_exist(doc),
    }


def _unreachable(health: SourceHealth, readiness: Readiness, now: float) -> dict[str, Any] | None:
    """Return the banner saying since when the cluster cannot be reached and why; None while it can."""
    if health.healthy or health.down_since is None:
        return None
    kinds = readiness.detail.get("kinds", {})
    return {
        "since": rfc3339(health.down_since),
        "down_for": format_duration(max(0.0, now - health.down_since)),
        "error": health.last_error or "not known",
        # Nothing listed: an empty queue would say "nothing waits" when nothing is known.
        "nothing_listed": not any(k.get("listed") for k in kinds.values()),
    }


def _was_stale(readiness: Readiness, now: float) -> dict[str, Any] | None:
    """Return the latest ended outage of any kind (unreachable, or a watch found silent): when, how long,
    why; None when none ended. A short one is over before anyone looks: this line says it happened."""
    latest: dict[str, Any] | None = None
    for kind, info in readiness.detail.get("kinds", {}).items():
        src = info.get("source") or {}
        since, seconds = src.get("last_outage_since"), src.get("last_outage_seconds")
        if since is None or seconds is None:
            continue
        if latest is None or since + seconds > latest["ended"]:
            latest = {
                "kind": kind,
                "ended": since + seconds,
                "seconds": seconds,
                "why": src.get("last_outage_error"),
            }
    if latest is None:
        return None
    return {
        "kind": latest["kind"],
        "for": format_duration(latest["seconds"]),
        "ago": format_duration(max(0.0, now - latest["ended"])),
        "why": latest["why"] or "not known",
    }


def page_context(
    *,
    tick: Tick | None,
    docs: QueueDocuments | None,
    readiness: Readiness,
    tiers: list[Any],
    source: str,
    sim_speed: float | None = None,
) -> dict[str, Any]:
    """Return the template's variables; without a tick yet, only the freshness section is filled.

    `sim_speed`: the cluster is the simulator, whose clock runs this many times faster than the wall clock;
    the page then says that its times are simulated (the idle-GPU figures are not: Prometheus stamps them
    with the wall clock, and they say so).
    """
    ctx: dict[str, Any] = {
        "source": source,
        "clock_note": f"simulated time, {sim_speed:g}× real" if sim_speed is not None else "",
        "ready": readiness.ready,
        "problems": list(readiness.problems),
        "stale_seconds": readiness.detail.get("stale_seconds"),
        "evaluated": tick is not None,
        "was_stale": _was_stale(readiness, tick.snapshot.at) if tick is not None else None,
    }
    if tick is None or docs is None:
        return ctx
    snap = tick.snapshot
    now = snap.at
    ctx["unreachable"] = _unreachable(tick.health, readiness, now)
    sections = []
    for t in tiers:
        # Rows, not their JSON: only the rows shown are presented (the others are only counted).
        waiting = [
            r for r in docs.rows if r.tier == t.name and r.state in ("pending", "partial", "quota_blocked")
        ]
        running = tick.running_by_tier.get(t.name, 0)
        gated = sum(1 for r in docs.rows if r.tier == t.name and r.state == "gated")
        sections.append(
            {
                "name": t.name,
                "warn": format_duration(t.warn_after),
                "critical": format_duration(t.critical_after),
                "waiting": len(waiting),
                "over_warn": sum(1 for r in waiting if r.status.severity),
                "running": running,
                "gated": gated,
                "rows": [_row(r.doc) for r in waiting[:ROWS_PER_TIER]],
                "more": max(0, len(waiting) - ROWS_PER_TIER),
            }
        )
    cap = snap.capacity
    preemptions = []
    for seen, p in zip(snap.preemptions[:PREEMPTIONS_SHOWN], docs.preemptions, strict=False):
        preemptor = "/".join(x for x in (p["preemptor_namespace"], p["preemptor_name"]) if x) or (
            p["preemptor_uid"] or "not known yet"
        )
        at = seen.at
        preemptions.append(
            {
                "victim": f"{p['victim_namespace']}/{p['victim_name']}",
                "workload": p["victim_workload"]["name"] if p["victim_workload"] else "",
                "victim_tier": p["victim_tier"] or "?",
                "preemptor": preemptor,
                "preemptor_tier": p["preemptor_tier"] or "?",
                "node": p["node"] or "?",
                "gpus": p["gpus"] if p["gpus"] is not None else "?",
                "lost": f"{p['gpu_hours_lost']:.2f}" if p["gpu_hours_lost"] is not None else "?",
                "at": p["at"],
                "ago": _ago(now - at) if at is not None else "?",
                "outcome": p["outcome"]["words"] if p["outcome"] else "not decided yet",
                "outcome_class": p["outcome"]["verdict"] if p["outcome"] else "open",
            }
        )
    partial = [_row(r.doc) for r in docs.rows if r.state == "partial" and r.status.gang]
    quota = [
        {
            **q,
            "pct": round(min(100.0, 100.0 * (q["gpus_used"] or 0) / q["gpus_hard"]), 1)
            if q["gpus_hard"]
            else 100.0,
            "full": q["gpus_hard"] is not None and (q["gpus_used"] or 0) >= q["gpus_hard"],
        }
        for q in docs.quota
    ]
    frag = [
        {
            "workload": f"{f.key.namespace}/{f.key.name}",
            "kind": f.key.kind,
            "gpus": f.gpus_requested,
            "free": f.free_gpus_total,
            "largest": f.largest_free_on_one_node,
        }
        for f in snap.fragmentation
    ]
    ctx.update(
        at=rfc3339(snap.at),
        sections=sections,
        preemptions=preemptions,
        preemptions_total=len(docs.preemptions),
        partial_gangs=partial,
        quota=quota,
        fragmentation=frag,
        gpus_allocatable=cap.allocatable,
        gpus_used=cap.used,
        gpus_dra=cap.dra,
        gpus_free=cap.free_total,
        largest_free=cap.largest_free,
        nodes=len(cap.nodes),
        dra_problems=[
            {
                "namespace": d["namespace"],
                "pod": d["pod"],
                "owner": " ".join(x for x in (d["owner_kind"], d["owner_name"]) if x),
                "why": d["why"],
                "pending": format_duration(d["pending_seconds"]),
            }
            for d in docs.sections.get("dra_problems", ())
        ],
        waiting_total=sum(s["waiting"] for s in sections),
    )
    return ctx


ALERTS_SHOWN = 50
MESSAGES_SHOWN = 15
IDLE_SHOWN = 30


def alerts_context(service: AlertAdmin | None, store: AlertStore | None, now: float) -> dict[str, Any]:
    """Return the "Alerts" and "Last notifications" sections: pending/firing (muted ones flagged), newest
    messages with their receiver, subject and idempotency key."""
    if service is None:
        return {"alerting": False}
    rows = []
    counts = {"firing": 0, "pending": 0, "silenced": 0}
    for a, muted in service.listed_alerts(now):
        if a.state.value not in ("firing", "pending"):
            continue
        silenced = bool(muted.silenced_by)
        inhibited = bool(muted.inhibited_by)
        state = "silenced" if silenced else ("inhibited" if inhibited else a.state.value)
        if state in counts:
            counts[state] += 1
        since = a.fired_at if a.fired_at is not None else a.active_at
        labels = a.labels
        rows.append(
            {
                "alertname": a.alertname,
                "severity": a.severity or "none",
                "state": state,
                "summary": a.annotations.get("summary", ""),
                "where": "/".join(x for x in (labels.get("namespace", ""), labels.get("workload", "")) if x),
                # Relative, as the queue rows: the page is read where it is served, whatever external_url says.
                "link": workload_path(labels["namespace"], labels["workload"], labels.get("kind", ""))
                if labels.get("workload") and labels.get("namespace")
                else "",
                "team": labels.get("team", ""),
                "since": _ago(now - since),
            }
        )
    messages = []
    if store is not None:
        for m in store.messages(limit=MESSAGES_SHOWN):
            integ = IntegrationId.parse(m.integration)
            receiver = integ.receiver if integ is not None else m.integration
            channel = f"{integ.kind} #{integ.index}" if integ is not None else ""
            messages.append(
                {
                    "receiver": receiver,
                    "channel": channel,
                    "subject": title(m.payload),
                    "key": m.key,
                    "status": m.status.value,
                    "attempts": m.attempts,
                    "error": m.last_error,
                    "when": rfc3339(m.delivered_at if m.delivered_at is not None else m.created),
                    "ago": _ago(now - (m.delivered_at if m.delivered_at is not None else m.created)),
                }
            )
    return {
        "alerting": True,
        "alerts": rows[:ALERTS_SHOWN],
        "alerts_more": max(0, len(rows) - ALERTS_SHOWN),
        "alert_counts": counts,
        "messages": messages,
    }


def gpu_context(report: dict[str, Any] | None, *, wall_now: float) -> dict[str, Any]:
    """Return the "Idle GPUs" section from GpuUsageService.report(), or say why there is none.

    Its figures are as of a wall-clock time (Prometheus's), so their age is reckoned against `wall_now`,
    never against the cluster's clock, which a simulator runs faster.
    """
    if report is None:
        return {"gpu": None}
    as_of = report["as_of"]
    age = _ago(wall_now - datetime.fromisoformat(as_of).timestamp()) if as_of else ""
    prom = report["prometheus"]
    idle = []
    waiting_for = {(x["namespace"], x["kind"], x["name"]): x for x in report.get("idle_while_waiting", [])}
    for w in report.get("idle_workloads", [])[:IDLE_SHOWN]:
        v = waiting_for.get((w["namespace"], w["kind"], w["name"]))
        idle.append(
            {
                "workload": f"{w['namespace']}/{w['name']}",
                "kind": w["kind"],
                "team": w["team"],
                "idle": w["idle_gpu_equivalent"],
                "allocated": w["gpus"] or w["gpus_allocated"],
                "util": w["util_avg_percent"],
                "blocking": f"{len(v['waiting'])} waiting, up to tier {v['highest_waiting_tier']}"
                if v
                else "",
            }
        )
    return {
        "gpu": {
            "url": prom["url"],
            "up": prom["up"],
            "error": prom["last_error"] or "",
            "available": report["available"],
            "stale": report["stale"],
            "as_of": as_of,
            "age": age,
            "threshold": report["threshold_percent"],
            "window": format_duration(report["window_seconds"]),
            "idle_gpus": report["idle_gpus"],
            "idle_slices": report["idle_slices"],
            "workloads": idle,
            "more": max(0, len(report.get("idle_workloads", [])) - IDLE_SHOWN),
            "while_waiting": len(report.get("idle_while_waiting", [])),
        }
    }
