"""An Alertmanager configuration from the `alerting:` section: the same route tree, receivers and inhibitions.

The tree is the one the service routes with (config `alerting.route`): per tier and per team exactly as the
operator wrote it, with every timing filled in from the parent as the service does, so Alertmanager and
Watchtower send an alert to the same receiver. Secrets are referenced by file, never written here: a receiver
whose secret came from an environment variable or inline text is refused with the path to fix.
"""

from __future__ import annotations

from watchtower.config import Settings
from watchtower.config.alerting import EmailConfig, InhibitConfig, ReceiverConfig, RouteConfig, WebhookConfig
from watchtower.domain.alerts.inhibition import InhibitRule, critical_inhibits_warning, never_inhibits_waits
from watchtower.domain.alerts.routing import workload_grouping
from watchtower.domain.alerts.rules import never_start, quota_blocked, tiered_wait
from watchtower.domain.promql.syntax import duration

from .alerting import DEGRADED_PICTURE, INFO, INFO_INHIBITOR, NEVER_START

# The service's default inhibition keys on the workload; the per-tier rules carry no workload, so without
# `tier` a critical wait in one tier would mute the warning of every other tier.
TIER_LABEL = "tier"
# Where the rules' InfoInhibitor goes: a receiver without integrations, so it only inhibits, never notifies.
INHIBITOR_RECEIVER = "watchtower-info-inhibitor"
# The alert label naming the team (the namespace's `teams.label`, else the namespace itself): one label,
# whatever the namespaces carry.
TEAM_LABEL = "team"


class SecretInlineError(ValueError):
    """A receiver's secret is known only as text: Alertmanager must read it from a file."""


def _route(r: RouteConfig, *, top: bool) -> dict[str, object]:
    out: dict[str, object] = {}
    if r.receiver or top:
        out["receiver"] = r.receiver
    if r.matchers:
        out["matchers"] = list(r.matchers)
    if r.group_by is not None:
        out["group_by"] = list(workload_grouping(r.group_by))  # as the service groups
    for key in ("group_wait", "group_interval", "repeat_interval"):
        v = getattr(r, key)
        if v is not None:
            out[key] = duration(v)
    if r.continue_:
        out["continue"] = True
    if r.routes:
        out["routes"] = [_route(c, top=False) for c in r.routes]
    return out


def route_tree(settings: Settings) -> dict[str, object]:
    """Return Alertmanager's `route:`; the top node carries the service's effective timings (its defaults
    differ from Alertmanager's), children inherit them as in both."""
    cfg = settings.alerting.route
    top = cfg.build()
    out = _route(cfg, top=True)
    out["group_by"] = list(top.group_by)
    out["group_wait"] = duration(top.group_wait)
    out["group_interval"] = duration(top.group_interval)
    out["repeat_interval"] = duration(top.repeat_interval)
    inhibitor = {"receiver": INHIBITOR_RECEIVER, "matchers": [f'alertname="{INFO_INHIBITOR}"']}
    # First, and without `continue`: no other route sees it.
    out["routes"] = [inhibitor, *(_route(c, top=False) for c in cfg.routes)]
    if settings.artefacts.fleet:
        _group_by_cluster(out, settings.cluster.label)
    return out


def _group_by_cluster(route: dict[str, object], label: str) -> None:
    """Fleet mode: each grouping of `route` and its children keeps the clusters' alerts apart."""
    group_by = route.get("group_by")
    if isinstance(group_by, list) and "..." not in group_by and label not in group_by:
        route["group_by"] = [label, *group_by]
    for child in route.get("routes", []):  # type: ignore[attr-defined]
        _group_by_cluster(child, label)


def receivers(settings: Settings) -> list[ReceiverConfig]:
    """Return the configured receivers and the InfoInhibitor's receiver without integrations; raise
    ValueError when a configured receiver already has its name."""
    configured = list(settings.alerting.receivers)
    if any(r.name == INHIBITOR_RECEIVER for r in configured):
        raise ValueError(
            f"alerting.receivers: the name {INHIBITOR_RECEIVER!r} is the generated Alertmanager "
            "configuration's own (the InfoInhibitor's receiver): name yours otherwise"
        )
    return [*configured, ReceiverConfig(name=INHIBITOR_RECEIVER)]


def _email(e: EmailConfig, where: str) -> dict[str, object]:
    out: dict[str, object] = {
        "to": ", ".join(e.to),
        "from": e.from_,
        "smarthost": f"{e.smarthost}:{e.port}",
        "send_resolved": e.send_resolved,
        # Alertmanager speaks implicit TLS by itself on port 465; "none" must not ask for STARTTLS.
        "require_tls": e.security != "none",
    }
    if e.username:
        out["auth_username"] = e.username
        if e.password_file:
            out["auth_password_file"] = e.password_file
        elif e.password is not None:
            raise SecretInlineError(
                f"{where}.password: give password_file, the file Alertmanager reads it from"
            )
    tls: dict[str, object] = {}
    if e.ca_file:
        tls["ca_file"] = e.ca_file
    if not e.verify:
        tls["insecure_skip_verify"] = True
    if tls:
        out["tls_config"] = tls
    return out


def _webhook(w: WebhookConfig) -> dict[str, object]:
    # Alertmanager cannot sign with Standard Webhooks: the secret stays with Watchtower's own delivery, and a
    # receiver that checks signatures rejects Alertmanager's posts unless it is told not to.
    return {"url": w.url, "send_resolved": w.send_resolved}


def _receiver(r: ReceiverConfig, i: int) -> dict[str, object]:
    out: dict[str, object] = {"name": r.name}
    where = f"alerting.receivers[{i}]"
    if r.email:
        out["email_configs"] = [_email(e, f"{where}.email[{j}]") for j, e in enumerate(r.email)]
    if r.webhooks:
        out["webhook_configs"] = [_webhook(w) for w in r.webhooks]
    return out


def _inhibit(i: InhibitConfig) -> dict[str, object]:
    return {
        "source_matchers": list(i.source_matchers),
        "target_matchers": list(i.target_matchers),
        "equal": list(i.equal),
    }


def info_inhibition() -> dict[str, object]:
    """Return the inhibition that mutes the rules' info alerts while their InfoInhibitor fires (while no
    warning or critical Watchtower alert does); the info alerts are named, so nobody else's are muted."""
    return {
        "source_matchers": [f'alertname="{INFO_INHIBITOR}"'],
        "target_matchers": [f'severity="{INFO}"', f'alertname=~"{"|".join(DEGRADED_PICTURE)}"'],
        "equal": [],
    }


def quota_blocked_inhibits_wait() -> dict[str, object]:
    """Return the inhibition "a team refused by its quota is not also told its work waits": while a
    WorkloadQuotaBlocked fires for team T, the wait alerts of T's workloads are muted (one cause, one
    notification). Keyed on `team` alone: the per-tier Prometheus wait alerts carry no team and are never
    muted by it."""
    waits = "|".join((tiered_wait.WARNING, tiered_wait.CRITICAL))
    return {
        "source_matchers": [f'alertname="{quota_blocked.NAME}"'],
        "target_matchers": [f'alertname=~"{waits}"'],
        "equal": [TEAM_LABEL],
    }


def from_policy(r: InhibitRule) -> dict[str, object]:
    """Return one of the service's inhibitions as Alertmanager writes it: the same matchers and labels."""
    return {
        "source_matchers": [str(m) for m in r.source],
        "target_matchers": [str(m) for m in r.target],
        "equal": list(r.equal),
    }


def inhibit_rules(settings: Settings) -> list[dict[str, object]]:
    """Return the configured inhibitions; by default the service's "critical mutes warning", keyed on the tier
    as well (it changes nothing for workload alerts: one workload has one tier), the service's "never mutes
    the same workload's waits", and "quota-blocked mutes the same team's waits". Either way last the InfoInhibitor's, which the info rules need to stay quiet
    alone."""
    rules = _inhibit_rules(settings)
    if settings.artefacts.fleet:  # one cluster's alert never mutes another's
        label = settings.cluster.label
        for r in rules:
            equal = r["equal"]
            assert isinstance(equal, list)
            if label not in equal:
                r["equal"] = [label, *equal]
    return rules


def _inhibit_rules(settings: Settings) -> list[dict[str, object]]:
    if settings.alerting.inhibit_rules is not None:
        return [*(_inhibit(i) for i in settings.alerting.inhibit_rules), info_inhibition()]
    # The per-tier Prometheus alerts name no workload, so the severity matchers alone: `tier` in `equal`
    # keeps a critical wait in one tier from muting another tier's warning.
    # The never alerts are no target, the service's and the rules' per-tier one alike: a tier's critical
    # wait must not mute the news that some of its work can never start.
    d = critical_inhibits_warning()
    nevers = "|".join((never_start.NAME, NEVER_START))
    return [
        {
            "source_matchers": [str(m) for m in d.source if m.name == "severity"],
            "target_matchers": [
                *(str(m) for m in d.target if m.name == "severity"),
                f'alertname!~"{nevers}"',
            ],
            "equal": [*d.equal, TIER_LABEL],
        },
        # Keyed on the workload: the per-tier WatchtowerWorkloadCanNeverStart names none, and muting a
        # tier's waits for one workload that can never start would hide the tier's real waits.
        from_policy(never_inhibits_waits()),
        quota_blocked_inhibits_wait(),
        info_inhibition(),
    ]


def alertmanager_config(settings: Settings) -> dict[str, object]:
    """Return an Alertmanager configuration; raise SecretInlineError for a secret not held in a file."""
    return {
        "route": route_tree(settings),
        "inhibit_rules": inhibit_rules(settings),
        "receivers": [_receiver(r, i) for i, r in enumerate(receivers(settings))],
    }
