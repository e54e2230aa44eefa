"""What `kubectl watchtower` prints: a describe-like block for one workload, tables for the queue and the teams,
or the API's JSON as JSON or YAML (`-o`), the way kubectl does."""

from __future__ import annotations

from typing import Any

import orjson
import yaml

from watchtower.domain.timefmt import format_duration

FORMATS = ("", "wide", "json", "yaml")


def dump(doc: Any, fmt: str) -> str:
    """Return `doc` as `-o json` (indented, as kubectl) or `-o yaml` prints it."""
    if fmt == "json":
        return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def _dur(seconds: Any) -> str:
    return format_duration(float(seconds)) if isinstance(seconds, int | float) else "-"


def _num(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:.1f}" if isinstance(x, float) else str(x)


def table(header: list[str], rows: list[list[str]]) -> str:
    """Return rows under their header, columns padded by three spaces as kubectl's printer does."""
    if not rows:
        return ""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]
    return "\n".join(lines) + "\n"


def _position(w: dict[str, Any]) -> str:
    parts = []
    if w.get("position_in_tier") is not None:
        parts.append(f"{w['position_in_tier']} in its tier")
    if w.get("position_queue") is not None:
        parts.append(f"in queue {w['position_queue']}")
    ahead = w.get("ahead")
    if ahead:
        parts.append(f"{ahead} ahead ({w.get('ahead_higher_tier') or 0} of a higher tier)")
    return "; ".join(parts) or "-"


def _estimate(w: dict[str, Any]) -> str:
    e = w.get("start_estimate")
    if not e:
        return "none (too few starts of this tier seen)" if w.get("state") != "running" else "-"
    return str(e.get("text") or _dur(e.get("start_in_seconds")))


def why(detail: dict[str, Any], *, wide: bool) -> str:
    """Return `kubectl watchtower why`'s text for a `/api/v1/workloads/{ns}/{name}` body."""
    w = detail["workload"]
    limits = []
    if w.get("warn_after_seconds") is not None:
        limits.append(f"warns after {_dur(w['warn_after_seconds'])}")
    if w.get("critical_after_seconds") is not None:
        limits.append(f"critical after {_dur(w['critical_after_seconds'])}")
    if w.get("state") == "running" or not w.get("since"):
        # A running workload has no current wait: "running for 0s (since None)" read as a wait that never began.
        state = str(w.get("state"))
    else:
        state = f"{w['state']} for {_dur(w.get('wait_seconds'))} (since {w['since']})"
    if limits and w.get("state") != "running":
        state += f"; its tier {', '.join(limits)}"
    rows = [
        ("Name", f"{w['namespace']}/{w['name']}"),
        ("Kind", str(w.get("kind"))),
        ("Team", str(w.get("team") or "-")),
        ("Tier", str(w.get("tier") or "-")),
        ("State", state),
        ("Severity", str(w.get("severity") or "-")),
        ("GPUs", f"{w.get('gpus_requested')} asked, {w.get('gpus_held')} held"),
        ("Why", str(w.get("why") or "-")),
        ("Position", _position(w)),
        ("Estimate", _estimate(w)),
    ]
    never = w.get("never")
    if never:
        # Said apart from Why: what to change, not what to wait for.
        rows.insert(
            8,
            (
                "Never",
                f"asks {never.get('asks')}, {never.get('limit')} (said by {never.get('source')}): "
                "waiting longer will not help",
            ),
        )
    if wide:
        rows.append(("Pods", f"{w.get('pods_pending')} pending, {w.get('pods_running')} running"))
        rows.append(("Scheduler", str(w.get("scheduling_reason") or "-")))
        rows.append(("Message", str(w.get("message") or "-")))
        for r in w.get("reasons") or ():
            rows.append(("Reason", f"{r.get('reason')}: {r.get('nodes')} nodes ({r.get('text')})"))
    out = [f"{k + ':':<13}{v}" for k, v in rows]
    pre = detail.get("preemptions") or []
    if not pre:
        out.append(f"{'Preemptions:':<13}none")
    else:
        out.append("Preemptions:")
        for p in pre:
            who = f"{p.get('preemptor_kind')} {p.get('preemptor_namespace')}/{p.get('preemptor_name')}"
            lost = p.get("gpu_hours_lost")
            out.append(
                f"  {p.get('at')}  pod {p.get('victim_name')} on {p.get('node') or '-'} by {who} "
                f"({p.get('preemptor_tier') or '-'} tier); {_num(lost)} GPU-hours lost"
            )
    return "\n".join(out) + "\n"


def queue(doc: dict[str, Any], *, wide: bool) -> str:
    """Return the waiting work as a table, oldest first."""
    work = sorted(doc.get("workloads") or [], key=lambda w: (-float(w.get("wait_seconds") or 0), w["name"]))
    header = ["NAMESPACE", "NAME", "KIND", "TIER", "STATE", "WAIT", "GPUS", "WHY"]
    if wide:
        header += ["TEAM", "QUEUE", "POSITION", "ESTIMATE"]
    rows = []
    for w in work:
        row = [
            w["namespace"],
            w["name"],
            str(w.get("kind")),
            str(w.get("tier") or "-"),
            w["state"],
            _dur(w.get("wait_seconds")),
            str(w.get("gpus_requested")),
            str(w.get("why") or "-"),
        ]
        if wide:
            row += [
                str(w.get("team") or "-"),
                str(w.get("position_queue") or "-"),
                _num(w.get("position_in_tier")),
                _estimate(w),
            ]
        rows.append(row)
    return table(header, rows)


def teams(report: dict[str, Any], waiting: dict[str, int], *, wide: bool) -> str:
    """Return GPU-hours used, entitled and waiting per team in the report's week, and the work waiting now."""
    header = ["TEAM", "USED GPU-H", "ENTITLED GPU-H", "WAITING GPU-H", "WAITING NOW"]
    if wide:
        header += ["ATTAINMENT", "FAIR SHARE GPU-H", "STARVED", "PREEMPTED"]
    rows = []
    for t in report.get("teams") or []:
        used, demand = t.get("used_gpu_hours"), t.get("demand_gpu_hours")
        waits = max(0.0, demand - used) if demand is not None and used is not None else None
        row = [
            t["team"],
            _num(used),
            _num(t.get("entitlement_gpu_hours")),
            _num(waits),
            str(waiting.get(t["team"], 0)),
        ]
        if wide:
            row += [
                _num(t.get("attainment")),
                _num(t.get("fair_share_gpu_hours")),
                str(t.get("starvation_incidents", 0)),
                str(sum((t.get("preemptions_suffered") or {}).values())),
            ]
        rows.append(row)
    return table(header, rows)
