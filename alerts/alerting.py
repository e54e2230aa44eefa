"""Alerting rules for Prometheus that mirror the service's own alerts, on the `watchtower_*` metrics.

The service alerts per workload and delivers itself; these rules alert per tier from what it exports, for teams
who route everything through their own Alertmanager, and they watch the watcher (down, stalled, stale).
Thresholds are the tier policy's, `for` the service's `pending_for` (per alert, or per the service alert a rule
mirrors), runbook links the service's pattern.
"""

from __future__ import annotations

import re

from watchtower.domain.alerts.rules import (
    config_invalid,
    gpu_idle,
    never_start,
    preemption_thrash,
    self_health,
    tiered_wait,
)
from watchtower.domain.alerts.rules.base import human
from watchtower.domain.promql.names import MALFORMED_OBJECTS_SKIPPED, total
from watchtower.domain.promql.syntax import duration
from watchtower.domain.tiers import Tier

from .params import RuleParams

QUEUE_WAIT_WARNING = "WatchtowerQueueWaitWarning"
QUEUE_WAIT_CRITICAL = "WatchtowerQueueWaitCritical"
DOWN = "WatchtowerDown"
STALLED = "WatchtowerEvaluationStalled"
KUBERNETES_STALE = "WatchtowerKubernetesStale"
GPU_IDLE = "WatchtowerGPUIdleWhileQueueWaits"
PREEMPTION_THRASH = "WatchtowerPreemptionThrash"
PREEMPTIONS_UNHELPFUL = "WatchtowerPreemptionsUnhelpful"
NEVER_START = "WatchtowerWorkloadCanNeverStart"
CONFIG_INVALID = config_invalid.NAME  # the same name as the service's own alert: one runbook, one meaning
OBJECTS_UNREADABLE = "WatchtowerObjectsUnreadable"
INFO_INHIBITOR = "WatchtowerInfoInhibitor"

# Info: Watchtower runs and alerts, but its picture lacks something. Alone it is not worth a notification;
# beside a warning or critical it says why that alert may be incomplete. Whole-picture failures (not
# scraped, not evaluating, no Kubernetes watch) stay critical: the queue alerts are missing or frozen then.
INFO = "info"
DEGRADED_PICTURE = (OBJECTS_UNREADABLE,)
# Rules that flap when their condition dips for one evaluation (a replica restarting, the oldest workload
# starting while the next is just under the threshold, a preemption ageing out of the window): the
# built-in alerting keeps such alerts firing for `alerting.rules.keep_firing_for`; these rules do the same.
KEEP_FIRING = (QUEUE_WAIT_WARNING, QUEUE_WAIT_CRITICAL, PREEMPTION_THRASH)

ALERTNAMES = (
    QUEUE_WAIT_WARNING,
    QUEUE_WAIT_CRITICAL,
    DOWN,
    STALLED,
    KUBERNETES_STALE,
    GPU_IDLE,
    PREEMPTION_THRASH,
    PREEMPTIONS_UNHELPFUL,
    NEVER_START,
    CONFIG_INVALID,
    OBJECTS_UNREADABLE,
    INFO_INHIBITOR,
)


def queue_wait_expr(p: RuleParams, tier: str, threshold: float) -> str:
    # >= as in the service: a workload that has waited exactly its threshold is over it.
    return f"{p.own.oldest_wait('tier', tier=tier)} >= {threshold:g}"


def _rule(
    p: RuleParams,
    name: str,
    expr: str,
    *,
    labels: dict[str, str],
    annotations: dict[str, str],
    mirrors: str = "",
    for_: float | None = None,
) -> dict[str, object]:
    out: dict[str, object] = {"alert": name, "expr": expr}
    wait = p.for_of(name, mirrors) if for_ is None else for_
    if wait:
        out["for"] = duration(wait)
    if p.keep_firing_for and name in KEEP_FIRING:
        out["keep_firing_for"] = duration(p.keep_firing_for)
    out["labels"] = labels
    out["annotations"] = {**annotations, "runbook_url": p.runbook_url(name)}
    return out


def _queue_wait(p: RuleParams, t: Tier, severity: str) -> dict[str, object]:
    name, mirrors, threshold, key = {
        "warning": (QUEUE_WAIT_WARNING, tiered_wait.WARNING, t.warn_after, "warn_after"),
        "critical": (QUEUE_WAIT_CRITICAL, tiered_wait.CRITICAL, t.critical_after, "critical_after"),
    }[severity]
    return _rule(
        p,
        name,
        queue_wait_expr(p, t.name, threshold),
        mirrors=mirrors,
        labels={"severity": severity, "tier": t.name},
        annotations={
            "summary": f"Work in the {t.name} tier has waited {{{{ $value | humanizeDuration }}}}, "
            f"over its {severity} threshold of {human(threshold)}",
            "description": f"The oldest waiting workload of tier {t.name} has waited "
            f"{{{{ $value | humanizeDuration }}}} ({key} of the tier: {human(threshold)}). "
            "Watchtower's status page and its own alerts name the workloads and why they wait.",
        },
    )


def down_expr(p: RuleParams) -> str:
    wt = p.watchtower_selector
    return f"(up{{{wt}}} == 0) or absent(up{{{wt}}})"


def thrash_expr(p: RuleParams) -> str:
    # >= as in the service: the thrash count-th preemption within the window makes a workload thrash.
    return f"{p.own.most_preemptions('tier')} >= {p.thrash_count}"


def thrash_rule(p: RuleParams) -> dict[str, object]:
    return _rule(
        p,
        PREEMPTION_THRASH,
        thrash_expr(p),
        mirrors=preemption_thrash.NAME,
        labels={"severity": "warning"},
        annotations={
            "summary": "A workload of the {{ $labels.tier }} tier was preempted {{ $value }} times in "
            + human(p.thrash_window),
            "description": "One workload of tier {{ $labels.tier }} was preempted {{ $value }} times within "
            f"{human(p.thrash_window)} (alert at {p.thrash_count}): it restarts without making progress. "
            "Watchtower's WorkloadPreemptionThrash alert and the Preemption churn dashboard name it and its "
            "preemptors.",
        },
    )


# A tier's preemptions "mostly do not help": more than half of those judged within the hour, once at least a few
# were (one preemption that did not help is 100 %, and says little).
UNHELPFUL_WINDOW = 3600.0
UNHELPFUL_SHARE = 0.5
UNHELPFUL_MIN_JUDGED = 4


def unhelpful_expr(p: RuleParams) -> str:
    w = p.w(UNHELPFUL_WINDOW)
    judged = p.own.preemptions_judged(w, "preemptor_tier")
    unhelpful = p.own.preemptions_judged(w, "preemptor_tier", outcome="did_not_help")
    return f"{unhelpful} / {judged} > {UNHELPFUL_SHARE:g} and {judged} >= {UNHELPFUL_MIN_JUDGED}"


def unhelpful_rule(p: RuleParams) -> dict[str, object]:
    window = human(UNHELPFUL_WINDOW)
    return _rule(
        p,
        PREEMPTIONS_UNHELPFUL,
        unhelpful_expr(p),
        labels={"severity": "warning"},
        annotations={
            "summary": "Most preemptions by the {{ $labels.preemptor_tier }} tier did not help "
            f"({{{{ $value | humanizePercentage }}}} in {window})",
            "description": "{{ $value | humanizePercentage }} of the preemptions made for pods of tier "
            f"{{{{ $labels.preemptor_tier }}}} within {window} did not help (alert above "
            f"{UNHELPFUL_SHARE:.0%} of at least {UNHELPFUL_MIN_JUDGED}): the preemptor started on another node "
            "than its victims', still waited, was deleted, or another pod took the room. The victims' work was "
            "thrown away for nothing. /api/v1/preemptions and the Preemption churn dashboard say which and why.",
        },
    )


def _classes_regex(classes: list[str]) -> str:
    # PromQL strings need their backslashes doubled on top of the regular expression's own escaping.
    return "|".join(re.escape(c) for c in sorted(classes)).replace("\\", "\\\\")


def gpu_idle_expr(p: RuleParams, waiting: Tier) -> str:
    """Idle devices per namespace (with its team) held by pods not of a tier above `waiting`, while work of
    that tier waits. KSM gives a pod's PriorityClass name, not its value: a class listed under a higher tier
    is above; every other class counts as the lowest tier (pods without a class have priority 0)."""
    q = p.queries
    idle = q.pod_idle_devices(p.idle_window, p.idle_threshold)
    rank = p.tiers.rank(waiting.name)
    above = [c for t in p.tiers.tiers[:rank] for c in t.classes]
    if above:
        sel = f'{q.config.ksm_selector},priority_class=~"{_classes_regex(above)}"'.lstrip(",")
        info = f"kube_pod_info{{{sel}}}"
        if q.config.ksm_bridge > 0:
            info = f"last_over_time({info}[{duration(q.config.ksm_bridge)}])"
        idle = f"({idle}) unless on (namespace, pod) max by (namespace, pod) ({q.normalise_ksm(info)})"
    per_ns = f"sum by (namespace) ({idle})"
    team = q.namespace_team()
    with_team = (
        f"(({per_ns}) * on (namespace) group_left (team) {team}) or "
        f'label_replace(({per_ns}) unless on (namespace) {team}, "team", "$1", "namespace", "(.*)")'
    )
    pending = f"{p.own.pending(tier=waiting.name)} > 0"
    return f"({with_team}) and on () ({pending})"


def _gpu_idle(p: RuleParams, t: Tier) -> dict[str, object]:
    return _rule(
        p,
        GPU_IDLE,
        gpu_idle_expr(p, t),
        mirrors=gpu_idle.NAME,
        labels={"severity": "warning", "tier": t.name},
        annotations={
            "summary": "{{ $value }} GPU device(s) of namespace {{ $labels.namespace }} (team "
            "{{ $labels.team }}) idle for " + human(p.idle_window) + f" while {t.name}-tier work waits",
            "description": "Pods of namespace {{ $labels.namespace }} hold {{ $value }} GPU device(s) (whole GPUs "
            f"and MIG slices) whose utilisation stayed under {p.idle_threshold:g} % for {human(p.idle_window)}, "
            f"while workloads of the {t.name} tier wait and those pods are not of a higher tier.",
        },
    )


def never_expr(p: RuleParams) -> str:
    return f"{p.own.never_startable('tier', 'reason')} > 0"


def never_rule(p: RuleParams) -> dict[str, object]:
    # At once, as the service's WorkloadCanNeverStart: no wait changes it.
    return _rule(
        p,
        NEVER_START,
        never_expr(p),
        for_=0.0,
        labels={"severity": "warning"},
        annotations={
            "summary": "{{ $value }} workload(s) of the {{ $labels.tier }} tier can never start as the "
            "cluster is configured ({{ $labels.reason }})",
            "description": "{{ $value }} waiting workload(s) of tier {{ $labels.tier }} ask more than the "
            "cluster can ever give ({{ $labels.reason }}): waiting longer will not help. Watchtower's "
            f"{never_start.NAME} alert and its status page name each one with its numbers.",
        },
    )


def alerting_group(p: RuleParams) -> dict[str, object]:
    """Return the rule group of alerts: per-tier waits, idle GPUs while a tier waits, Watchtower's health."""
    rules: list[dict[str, object]] = []
    for t in p.tiers.tiers:
        rules.append(_queue_wait(p, t, "warning"))
        rules.append(_queue_wait(p, t, "critical"))
    rules.append(
        _rule(
            p,
            DOWN,
            down_expr(p),
            for_=p.down_for,
            labels={"severity": "critical"},
            annotations={
                "summary": "Watchtower's /metrics cannot be scraped",
                "description": "Prometheus has not scraped Watchtower ({{ $labels.job }} "
                "{{ $labels.instance }}) for " + human(p.down_for) + ": queue alerts from these rules "
                "and from Watchtower itself may be missing.",
            },
        )
    )
    stall = p.w(p.stall_window)
    rules.append(
        _rule(
            p,
            STALLED,
            f"{p.own.evaluation_changes(stall)} == 0",
            for_=0.0,
            labels={"severity": "critical"},
            annotations={
                "summary": f"Watchtower has not evaluated the queue for {human(p.stall_window)}",
                "description": "Watchtower ({{ $labels.instance }}) is scraped but its last evaluation "
                f"did not change for {human(p.stall_window)} (it evaluates every "
                f"{human(p.evaluate_every)}): its queue figures and alerts are frozen.",
            },
        )
    )
    rules.append(
        _rule(
            p,
            KUBERNETES_STALE,
            f"{p.own.staleness('job', 'instance')} >= {p.unreachable_after:g}",
            mirrors=self_health.NAME,
            labels={"severity": "critical"},
            annotations={
                "summary": "Watchtower has not heard from the Kubernetes API for "
                "{{ $value | humanizeDuration }}",
                "description": "Watchtower's picture of the cluster is {{ $value | humanizeDuration }} old "
                f"(alert at {human(p.unreachable_after)}): queue figures and alerts are based on a stale "
                "picture until its watch recovers.",
            },
        )
    )
    for t in p.tiers.tiers:
        rules.append(_gpu_idle(p, t))
    rules.append(thrash_rule(p))
    rules.append(unhelpful_rule(p))
    rules.append(never_rule(p))
    rules.append(
        _rule(
            p,
            CONFIG_INVALID,
            p.own.config_invalid("job", "instance"),
            for_=0.0,
            labels={"severity": "warning"},
            annotations={
                "summary": "Watchtower's configuration file changed to one it cannot use",
                "description": "Watchtower ({{ $labels.instance }}) keeps running with its previous "
                "configuration: the new file has problems, listed by YAML path in Watchtower's own "
                "WatchtowerConfigInvalid alert and its log.",
            },
        )
    )
    rules.append(objects_unreadable_rule(p))
    # Last: it reads the ALERTS series the rules above wrote in this same evaluation.
    rules.append(info_inhibitor_rule(p))
    return {"name": "watchtower.alerts", "rules": rules}


def objects_unreadable_expr(p: RuleParams) -> str:
    # max, not sum: leader and standby read (and skip) the same objects.
    skipped = f"increase({p.own.series(total(MALFORMED_OBJECTS_SKIPPED))}[{p.w(p.rate_window)}])"
    return f"max by (kind) ({skipped}) > 0"


def objects_unreadable_rule(p: RuleParams) -> dict[str, object]:
    return _rule(
        p,
        OBJECTS_UNREADABLE,
        objects_unreadable_expr(p),
        labels={"severity": INFO},
        annotations={
            # No $value: increase() extrapolates, and "1.25 objects" reads as a bug.
            "summary": "Watchtower could not read some {{ $labels.kind }} objects in the last "
            f"{human(p.rate_window)} and left them out of its picture",
            "description": "Objects of kind {{ $labels.kind }} that Watchtower could not decode are left out of "
            "its picture: workloads among them are not shown and raise no alert. The other objects are "
            "unaffected. An info alert: it is notified only beside a warning or critical Watchtower alert "
            f"({INFO_INHIBITOR} mutes it otherwise).",
        },
    )


def _alertnames_regex(names: tuple[str, ...]) -> str:
    return "|".join(names)


def info_inhibitor_expr(p: RuleParams) -> str:
    """Return the InfoInhibitor's condition: an info alert of these rules is pending or firing and no warning
    or critical one of them fires. Alertmanager's inhibition then mutes the info alerts (kube-prometheus' InfoInhibitor,
    for Watchtower's alerts only). Pending counts too, so the inhibitor is there before the info alert
    fires, whatever its `for`."""
    info = f'ALERTS{{alertname=~"{_alertnames_regex(DEGRADED_PICTURE)}",severity="{INFO}"}}'
    loud = tuple(n for n in ALERTNAMES if n not in DEGRADED_PICTURE and n != INFO_INHIBITOR)
    firing = (
        f'ALERTS{{alertname=~"{_alertnames_regex(loud)}",alertstate="firing",severity=~"warning|critical"}}'
    )
    return f"count({info}) unless on () count({firing})"


def info_inhibitor_rule(p: RuleParams) -> dict[str, object]:
    return _rule(
        p,
        INFO_INHIBITOR,
        info_inhibitor_expr(p),
        for_=0.0,
        labels={"severity": "none"},
        annotations={
            "summary": "Mutes Watchtower's info alerts while no warning or critical Watchtower alert fires",
            "description": "Not a problem in itself: the generated Alertmanager configuration routes this alert "
            "to a receiver without integrations and lets it inhibit the info alerts "
            f"({', '.join(DEGRADED_PICTURE)}), which are worth reading only beside a warning or critical "
            "alert.",
        },
    )
