"""Cross-field checks: tier names and priorities distinct, routes naming receivers that exist, Prometheus
windows spanning enough scrapes.

Pydantic runs a model validator only once every field of that model is valid, so a duplicate tier name used to
be reported only after a bad `warn_after` elsewhere was fixed. These checks are written over plain data (the
model's own dump, or the raw YAML) and skip what they cannot read: the models call them for programmatic use,
and the loader runs them again on the raw file when field validation failed, so `check-config` lists every
problem in one run. Their pydantic error type is CONSISTENCY, which the loader replaces by that second pass.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic_core import PydanticCustomError

from watchtower.domain.promql.syntax import check_window

from .durations import parse_duration

CONSISTENCY = "consistency"

Problem = tuple[str, str]  # (YAML path, what is wrong)


def raise_problems(problems: list[Problem]) -> None:
    """Raise one pydantic error listing `problems` (paths relative to the model), if there are any."""
    if problems:
        text = "; ".join(f"{path}: {msg}" if path else msg for path, msg in problems)
        raise PydanticCustomError(CONSISTENCY, "{problems}", {"problems": text})


def _at(base: str, rest: str) -> str:
    if not base:
        return rest.lstrip(".")
    return f"{base}{rest}" if rest.startswith("[") or not rest else f"{base}.{rest.lstrip('.')}"


def _duration(v: Any) -> float | None:
    try:
        return parse_duration(v)
    except (TypeError, ValueError):
        return None


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return None


def _repeated(values: list[Any]) -> list[Any]:
    return sorted({v for v in values if values.count(v) > 1}, key=str)


def order_problem(warn_after: float | None, critical_after: float | None) -> str | None:
    """Return why a tier's thresholds are out of order, or None."""
    if warn_after is not None and critical_after is not None and critical_after < warn_after:
        return f"critical_after ({critical_after:g}s) is shorter than warn_after ({warn_after:g}s)"
    return None


def tier_problems(tiers: Any, base: str = "tiers") -> list[Problem]:
    """Return every problem between tiers (and within one tier's thresholds) that `tiers` shows."""
    if not isinstance(tiers, list):
        return []
    items = [(i, t) for i, t in enumerate(tiers) if isinstance(t, Mapping)]
    out: list[Problem] = []
    for i, t in items:
        msg = order_problem(_duration(t.get("warn_after")), _duration(t.get("critical_after")))
        if msg:
            out.append((_at(base, f"[{i}]"), msg))
    names = [t["name"] for _, t in items if isinstance(t.get("name"), str)]
    if dup := _repeated(names):
        out.append((base, f"tier names must be unique; repeated: {', '.join(dup)}"))
    mins = [m for _, t in items if (m := _int(t.get("min_priority"))) is not None]
    for m in _repeated(mins):
        out.append((base, f"two tiers share min_priority {m}: a pod could not tell which it is in"))
    classes = [
        c for _, t in items if isinstance(t.get("classes"), list) for c in t["classes"] if isinstance(c, str)
    ]
    for c in _repeated(classes):
        out.append((base, f"PriorityClass {c!r} is listed in two tiers"))
    return out


def _route_receivers(route: Any, path: str) -> Iterator[tuple[str, str]]:
    if not isinstance(route, Mapping):
        return
    if isinstance(route.get("receiver"), str) and route["receiver"]:
        yield _at(path, "receiver"), route["receiver"]
    children = route.get("routes")
    for i, child in enumerate(children if isinstance(children, list) else []):
        yield from _route_receivers(child, _at(path, f"routes[{i}]"))


def alerting_problems(alerting: Mapping[str, Any], base: str = "") -> list[Problem]:
    """Return every problem between `alerting.receivers` and the routes naming them."""
    out: list[Problem] = []
    receivers, route = alerting.get("receivers"), alerting.get("route")
    names: list[str] | None = None
    if isinstance(receivers, list):
        names = [r["name"] for r in receivers if isinstance(r, Mapping) and isinstance(r.get("name"), str)]
        if dup := _repeated(names):
            out.append((_at(base, "receivers"), f"receiver names must be unique; repeated: {', '.join(dup)}"))
    if isinstance(route, Mapping):
        if not route.get("receiver"):
            out.append((_at(base, "route.receiver"), "the top route needs a receiver"))
        if names is not None:
            known = ", ".join(names) or "none"
            for path, name in _route_receivers(route, _at(base, "route")):
                if name not in names:
                    out.append((path, f"{name!r} is not one of the receivers ({known})"))
    return out


def prometheus_problems(prom: Mapping[str, Any], base: str = "") -> list[Problem]:
    """Return every problem between the `prometheus:` windows and the scrape interval."""
    idle, scrape, step = (_duration(prom.get(k)) for k in ("idle_window", "scrape_interval", "query_step"))
    out: list[Problem] = []
    if idle and scrape:
        try:
            check_window(idle, scrape)
        except ValueError as e:
            out.append((_at(base, "idle_window"), str(e)))
    if idle and step and step >= idle:
        out.append(
            (_at(base, "query_step"), f"query_step ({step:g}s) is not shorter than idle_window ({idle:g}s)")
        )
    return out


def fairness_problems(fairness: Mapping[str, Any], receivers: Any, base: str = "") -> list[Problem]:
    """Return the problems between `fairness.smtp_receiver`/`send` and the email receivers of
    `alerting.receivers` (the report is sent with one of their SMTP settings)."""
    if not isinstance(receivers, list):
        return []
    named = [r for r in receivers if isinstance(r, Mapping) and isinstance(r.get("name"), str)]
    emailing = [r["name"] for r in named if isinstance(r.get("email"), list) and r["email"]]
    known = ", ".join(emailing) or "none"
    chosen = fairness.get("smtp_receiver")
    out: list[Problem] = []
    if isinstance(chosen, str) and chosen:
        if chosen not in emailing:
            what = "has no email integration" if chosen in [r["name"] for r in named] else "is not a receiver"
            out.append(
                (
                    _at(base, "smtp_receiver"),
                    f"{chosen!r} {what} (email receivers in alerting.receivers: {known})",
                )
            )
    elif fairness.get("send") is True and not emailing:
        out.append(
            (
                _at(base, "send"),
                "sending the report needs an email receiver in alerting.receivers; there is none",
            )
        )
    return out


def fleet_send_problems(fleet: Any, fairness: Any) -> list[Problem]:
    """Return the problem of `fleet.report.send` without `fairness.send`: the fleet report rides the weekly
    report's job (its schedule, its SMTP receiver)."""
    report = fleet.get("report") if isinstance(fleet, Mapping) else None
    wanted = isinstance(report, Mapping) and report.get("send") is True
    sending = isinstance(fairness, Mapping) and fairness.get("send") is True
    if wanted and not sending:
        return [
            ("fleet.report.send", "the fleet report is sent with the weekly report: set fairness.send too")
        ]
    return []


def owners_problems(owners: Mapping[str, Any], receivers: Any) -> list[Problem]:
    """Return the problems between `owners` and `alerting.receivers`: its SMTP receiver (as the report's),
    and every receiver a contact or `allowed_receivers` names must exist."""
    if not isinstance(receivers, list) or not isinstance(owners, Mapping):
        return []
    out = fairness_problems({"smtp_receiver": owners.get("smtp_receiver")}, receivers, base="owners")
    names = {r.get("name") for r in receivers if isinstance(r, Mapping)}
    for i, c in enumerate(owners.get("contacts") or []):
        r = c.get("receiver") if isinstance(c, Mapping) else None
        if isinstance(r, str) and r and r not in names:
            out.append((f"owners.contacts[{i}].receiver", f"{r!r} is not a receiver in alerting.receivers"))
    for i, r in enumerate(owners.get("allowed_receivers") or []):
        if isinstance(r, str) and r not in names:
            out.append((f"owners.allowed_receivers[{i}]", f"{r!r} is not a receiver in alerting.receivers"))
    return out
