"""The queue JSON rendered as plain-text tables for a terminal (`analyze --format table`)."""

from __future__ import annotations

import textwrap
from typing import Any

from watchtower.domain.timefmt import format_duration

# The narrowest the wrapped last column gets, however narrow the terminal: below it a line per word.
MIN_WRAPPED = 30


def _clean(text: object) -> str:
    """Terminal-safe: control characters (escape sequences in a hostile name) are shown, not obeyed."""
    s = "" if text is None else str(text)
    return "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in s)


def _table(headers: list[str], rows: list[list[Any]], *, width: int | None = None) -> str:
    """Return the rows under their headers; with `width`, the last column is wrapped onto continuation
    lines to fit it (never cut: the end of a why is often the preemption verdict). When the other columns
    leave it less than MIN_WRAPPED, it goes under its row instead, wrapped to the whole width."""
    cells = [[_clean(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    indent = sum(widths[:-1]) + 2 * (len(widths) - 1)
    below = width is not None and width - indent < MIN_WRAPPED
    if below:
        label = f"{headers[-1].lower()}: "
        headers, widths = headers[:-1], widths[:-1]
    elif width is not None:
        widths[-1] = max(len(headers[-1]), min(widths[-1], width - indent))
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line.rstrip()]
    for r in cells:
        if below:
            out.append("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)).rstrip())
            text = textwrap.wrap(label + r[-1], max(MIN_WRAPPED, (width or 0) - 4), break_on_hyphens=False)
            out.extend("    " + more for more in text)
            continue
        last = textwrap.wrap(r[-1], widths[-1], break_on_hyphens=False) or [""]
        head = [*r[:-1], last[0]]
        out.append("  ".join(c.ljust(w) for c, w in zip(head, widths, strict=True)).rstrip())
        out.extend(" " * indent + more for more in last[1:])
    return "\n".join(out)


def _heading(doc: dict[str, Any]) -> str:
    source = doc.get("at_source")
    if source == "dump":
        return f"Queue as of {doc['at']}, the newest time in the dump; --at to choose"
    if source == "now":
        return f"Queue as of {doc['at']} (now: the dump holds no time); --at to choose"
    return f"Queue at {doc['at']}"


def render(doc: dict[str, Any], *, width: int | None = None) -> str:
    """Return the document as tables; `width` (the terminal's columns) wraps the WHY column to fit."""
    parts = [_heading(doc)]
    cap = doc["capacity"]
    parts.append(
        f"GPUs: {cap['gpus_used']}/{cap['gpus_allocatable']} allocated, {cap['gpus_free']} free "
        f"(largest on one node: {cap['largest_free_on_one_node']}); gated pods: {doc['gated_pods']}"
    )
    waiting = [w for w in doc["workloads"] if w["state"] in ("pending", "partial", "quota_blocked", "gated")]
    parts.append("\nWaiting workloads")
    if waiting:
        parts.append(
            _table(
                [
                    "TIER",
                    "NAMESPACE",
                    "WORKLOAD",
                    "STATE",
                    "WAIT",
                    "THRESHOLD",
                    "GPUS",
                    "PODS",
                    "PREEMPTION",
                    "WHY",
                ],
                [
                    [
                        w["tier"],
                        w["namespace"],
                        f"{w['kind']}/{w['name']}",
                        w["state"],
                        format_duration(w["wait_seconds"]),
                        f"{format_duration(w['warn_after_seconds'])}/{format_duration(w['critical_after_seconds'])}"
                        + (f" {w['severity'].upper()}" if w["severity"] else ""),
                        w["gpus_requested"],
                        f"{w['pods_running']}/{w['pods_running'] + w['pods_pending']}",
                        w["preemption"],
                        w["why"],
                    ]
                    for w in waiting
                ],
                width=width,
            )
        )
    else:
        parts.append("(none)")
    if doc["partial_gangs"]:
        parts.append("\nPartial gangs (holding GPUs while waiting)")
        parts.append(
            _table(
                ["NAMESPACE", "WORKLOAD", "GPUS HELD", "RUNNING", "PENDING", "WAIT"],
                [
                    [
                        g["namespace"],
                        f"{g['kind']}/{g['name']}",
                        g["gpus_held"],
                        g["pods_running"],
                        g["pods_pending"],
                        format_duration(g["wait_seconds"]),
                    ]
                    for g in doc["partial_gangs"]
                ],
            )
        )
    if doc["fragmentation"]:
        parts.append("\nFragmentation (fits in total free GPUs, on no single node)")
        parts.append(
            _table(
                ["NAMESPACE", "WORKLOAD", "GPUS/POD", "FREE TOTAL", "LARGEST FREE"],
                [
                    [
                        f["namespace"],
                        f"{f['kind']}/{f['name']}",
                        f["gpus_requested"],
                        f["free_gpus_total"],
                        f["largest_free_on_one_node"],
                    ]
                    for f in doc["fragmentation"]
                ],
            )
        )
    if doc["preemptions"]:
        parts.append("\nPreemptions")
        parts.append(
            _table(
                ["AT", "VICTIM", "TIER", "GPUS", "GPU-H LOST", "NODE", "PREEMPTOR"],
                [
                    [
                        p["at"],
                        f"{p['victim_namespace']}/{p['victim_name']}",
                        p["victim_tier"] or "?",
                        p["gpus"] or "?",
                        f"{p['gpu_hours_lost']:.2f}" if p["gpu_hours_lost"] is not None else "?",
                        p["node"] or "?",
                        f"{p['preemptor_namespace'] or ''}/{p['preemptor_name'] or ''}".strip("/")
                        or p["preemptor_uid"]
                        or "?",
                    ]
                    for p in doc["preemptions"]
                ],
            )
        )
    if doc["disruptions"]:
        parts.append("\nOther disruptions (not preemption)")
        parts.append(
            _table(
                ["NAMESPACE", "POD", "REASON", "AT"],
                [[d["namespace"], d["name"], d["reason"], d["at"]] for d in doc["disruptions"]],
            )
        )
    if doc.get("skipped"):
        parts.append(f"\nSkipped malformed objects: {sum(doc['skipped_total'].values())}")
        parts.append(
            _table(
                ["KIND", "UID", "NAME", "ERROR"],
                [[s["kind"], s["uid"], s["name"], s["error"][:100]] for s in doc["skipped"][:20]],
            )
        )
    return "\n".join(parts) + "\n"
