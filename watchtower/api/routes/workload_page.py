"""One workload's own page at `/workloads/{namespace}/{name}`: where every alert about it links.

Its pods and GPUs, its wait against its tier's thresholds, why it waits (the scheduler's reasons, whether
preemption can help), the preemptions it suffered and the alerts about it, as server-rendered HTML with every
string escaped by Jinja2. The JSON of the same workload is `/api/v1/workloads/{namespace}/{name}`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from watchtower.domain.messages.scheduler import PreemptionVerdict, preemption_note
from watchtower.domain.tick import Tick
from watchtower.domain.timefmt import format_duration
from watchtower.domain.workloads import WorkloadKey
from watchtower.services.alerting import AlertAdmin
from watchtower.services.queue_json import rfc3339

from ..deps import ContainerDep
from ..status_sections import STATE_WORDS
from ..wait_source import gang_words, kueue_words, pods_exist, preemption_words, queue_entitlement, read_from
from .status_page import PageRenderer, page_response
from .workloads import lookup, not_found, preemptions_of

router = APIRouter(tags=["status page"])

# The JSON's `dra_problem`, in the words of someone deciding what to do about it.
DRA_PROBLEM_WORDS = {
    "shortage": "GPUs short: no node has free devices for its claims (more capacity or less demand helps)",
    "config": "a configuration problem: a claim, template or device class is missing or wrong "
    "(more GPUs will not help)",
    "pending": "its claim is being allocated",
}


def _ago(seconds: float) -> str:
    return format_duration(max(0.0, seconds))


def _link(url: str) -> str:
    # Annotations are free text: only a web address or a path of ours becomes a link.
    return url if url.startswith(("https://", "http://", "/")) and not url.startswith("//") else ""


def _resources(r: Mapping[str, str] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted((r or {}).items())) or "?"


def _quota_words(q: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Return the quota refusal with its resource maps as the API server words them (`nvidia.com/gpu=8`)."""
    if q is None:
        return None
    return {
        **q,
        "requested": _resources(q["requested"]),
        "used": _resources(q["used"]),
        "limited": _resources(q["limited"]),
    }


def _pct(part: float, whole: float) -> float:
    return round(min(100.0, 100.0 * part / whole), 1) if whole > 0 else 100.0


def workload_context(
    doc: dict[str, Any],
    tick: Tick,
    held_by_node: Mapping[str, int],
    preemptions: list[dict[str, Any]],
    volcano_queues: Iterable[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Return the page's variables for one workload document (services.queue_json.workload_dict), the
    GPUs its pods hold per node and the tick's Volcano Queues (the one it names is shown)."""
    wait, warn, crit = doc["wait_seconds"], doc["warn_after_seconds"], doc["critical_after_seconds"]
    verdict = PreemptionVerdict(doc["preemption"])
    held = [{"node": n, "gpus": g} for n, g in held_by_node.items()]
    return {
        "w": doc,
        "state": STATE_WORDS.get(doc["state"], doc["state"]),
        "waiting": doc["state"] in ("pending", "partial", "quota_blocked"),
        "severity": doc["severity"] or "ok",
        "wait": format_duration(wait),
        "warn": format_duration(warn),
        "critical": format_duration(crit),
        "bar_pct": _pct(wait, crit if crit > 0 else max(wait, 1.0)),
        "warn_pct": _pct(warn, crit if crit > 0 else max(wait, 1.0)),
        "verdict": "" if verdict is PreemptionVerdict.UNKNOWN else preemption_note(doc["why"] or "", verdict),
        "annotations": sorted(doc["annotations"].items()),
        "held": sorted(held, key=lambda h: h["node"]),
        "quota": _quota_words(doc["quota"]),
        "read_from": read_from(doc),
        "pods_exist": pods_exist(doc),
        "preemption_found": preemption_words(doc),
        "gang_placement": gang_words(doc),
        "volcano": queue_entitlement(doc["volcano_queue"] or "", volcano_queues),
        "dra_problem": DRA_PROBLEM_WORDS.get(doc["dra_problem"] or "", doc["dra_problem"] or ""),
        "kueue": kueue_words(doc),
        "preemptions": [
            {
                **p,
                "preemptor": "/".join(x for x in (p["preemptor_namespace"], p["preemptor_name"]) if x)
                or p["preemptor_uid"]
                or "not known yet",
                "lost": f"{p['gpu_hours_lost']:.2f}" if p["gpu_hours_lost"] is not None else "?",
            }
            for p in preemptions
        ],
        "at": rfc3339(tick.at),
    }


def alerts_about(
    admin: AlertAdmin | None, namespace: str, name: str, kind: str | None, now: float
) -> list[dict[str, Any]]:
    """Return the alerts (firing, pending, recently resolved) whose labels name this workload."""
    if admin is None:
        return []
    rows = []
    for a, muted in admin.listed_alerts(now):
        lab = a.labels
        if lab.get("namespace") != namespace or lab.get("workload") != name:
            continue
        if kind is not None and (lab.get("kind") or lab.get("workload_kind") or kind) != kind:
            continue
        state = a.state.value
        if state != "resolved" and muted:
            state = "silenced" if muted.silenced_by else "inhibited"
        since = a.fired_at if a.fired_at is not None else a.active_at
        rows.append(
            {
                "alertname": a.alertname,
                "severity": a.severity or "none",
                "state": state,
                "summary": a.annotations.get("summary", ""),
                "description": a.annotations.get("description", ""),
                "since": rfc3339(since),
                "ago": _ago(now - since),
                "resolved": rfc3339(a.resolved_at) if a.resolved_at is not None else "",
                "runbook": _link(a.annotations.get("runbook_url", "")),
            }
        )
    return rows


@router.get("/workloads/{namespace}/{name}", response_class=HTMLResponse, include_in_schema=False)
async def workload_page(
    request: Request,
    namespace: str,
    name: str,
    container: ContainerDep,
    kind: Annotated[str | None, Query()] = None,
) -> HTMLResponse:
    # On the event loop, as the status page: alerting changes its state there.
    renderer: PageRenderer = request.app.state.pages
    tick = container.queue_tracker.latest
    admin = container.alerting.admin if container.alerting is not None else None
    now = container.clock.now()
    ctx: dict[str, Any] = {"namespace": namespace, "name": name, "kind": kind, "alerting": admin is not None}
    if tick is None:
        ctx["problem"] = "The cluster is still being listed: the queue has not been evaluated yet."
        ctx["alerts"] = alerts_about(admin, namespace, name, kind, now)
        return page_response(renderer.render_page("workload.html", ctx), 503)
    docs = container.documents.for_tick(tick)
    found = lookup(docs, container.queue_tracker, namespace, name, kind)
    if not found:
        why = not_found(namespace, name, kind)
        ctx["problem"] = why[:1].upper() + why[1:] + "."
        # Alerts outlive their workload (resolved ones are listed a while): a page that is gone still says them.
        ctx["alerts"] = alerts_about(admin, namespace, name, kind, now)
        return page_response(renderer.render_page("workload.html", ctx), 404)
    if len(found) > 1:
        ctx["problem"] = f"{namespace}/{name} names several workloads: pick one."
        ctx["kinds"] = sorted(d["kind"] for d in found)
        ctx["alerts"] = alerts_about(admin, namespace, name, kind, now)
        return page_response(renderer.render_page("workload.html", ctx), 409)
    doc = found[0]
    held = container.queue_tracker.gpus_by_node(WorkloadKey(namespace, doc["kind"], name))
    ctx.update(
        workload_context(
            doc,
            tick,
            held,
            preemptions_of(docs, namespace, name, doc["kind"]),
            docs.sections.get("volcano_queues", ()),
        )
    )
    ctx["kind"] = doc["kind"]
    ctx["alerts"] = alerts_about(admin, namespace, name, doc["kind"], now)
    return page_response(renderer.render_page("workload.html", ctx))
