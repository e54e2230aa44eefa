"""The `alerting:` section: rule thresholds, the routing tree, receivers (email, webhook) and the store."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from watchtower.domain.alerts.inhibition import InhibitRule, default_inhibitions
from watchtower.domain.alerts.integration import IntegrationId
from watchtower.domain.alerts.lifecycle import LifecyclePolicy
from watchtower.domain.alerts.matchers import Matcher, MatcherError
from watchtower.domain.alerts.routing import Route, route_key, workload_grouping
from watchtower.domain.alerts.rules import ALERTNAMES, RULES

from .consistency import alerting_problems, raise_problems
from .durations import Duration, PositiveDuration


class Section(BaseModel):
    # The same rules as the other sections (model.py imports this module, so it cannot be imported back).
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


def _matchers(texts: list[str]) -> tuple[Matcher, ...]:
    return tuple(Matcher.parse(t) for t in texts)


def _check_matchers(texts: list[str]) -> list[str]:
    for t in texts:
        try:
            Matcher.parse(t)
        except MatcherError as e:
            raise ValueError(str(e)) from None
    return texts


def _read_secret(data: Any, field: str) -> Any:
    """Fill `field` from `field_file` (a mounted Secret) when it is not set; the loader only does this for
    top-level sections, and receivers sit deeper."""
    if isinstance(data, dict) and data.get(f"{field}_file") and data.get(field) in (None, ""):
        path = data[f"{field}_file"]
        try:
            data = {**data, field: Path(path).read_text(encoding="utf-8").strip()}
        except OSError as e:
            raise ValueError(f"{field}_file: cannot read {path!r}: {e.strerror}") from None
    return data


# The lifecycle's defaults are the domain's (one copy), offered here as the configuration's.
_LIFECYCLE = LifecyclePolicy()


class RulesConfig(Section):
    pending_for: Duration = _LIFECYCLE.pending_for
    """Prometheus `for`: how long a condition must hold before the alert fires; `0s`: at once. WorkloadCanNeverStart fires at once whatever this says (waiting will not change it), unless `pending_for_by_rule` names it."""
    pending_for_by_rule: dict[str, Duration] = {}
    """`for` per alertname, overriding `pending_for`."""
    keep_firing_for: Duration = _LIFECYCLE.keep_firing_for
    """Prometheus `keep_firing_for`: how long an alert stays firing after its condition is gone."""
    thrash_count: int = Field(3, ge=1)
    """Preemptions within `queue.thrash_window` that make WorkloadPreemptionThrash fire."""
    # Moved to queue.thrash_window; the key stays only to say so to a file that still sets it.
    thrash_window: None = None
    """Moved to `queue.thrash_window`; setting it is an error that says so."""
    gang_stall_after: PositiveDuration = 600.0
    """A gang with some pods bound and others waiting this long fires WorkloadGangStalled."""
    unreachable_after: PositiveDuration = 120.0
    """The cluster unreachable this long fires the self-alert."""
    inversion_tiers: list[str] = ["critical", "high"]
    """Tiers whose work, waiting while lower-tier pods hold GPUs that preemption will not free, fires WorkloadPriorityInversion."""
    disabled: list[str] = []
    """Rule modules (`tiered_wait`, ...) or alertnames that never fire."""

    @field_validator("thrash_window", mode="before")
    @classmethod
    def _moved(cls, v: object) -> None:
        if v is not None:
            raise ValueError(
                "moved to queue.thrash_window: the preemptions a workload shows and the ones "
                "WorkloadPreemptionThrash counts are one count in one window"
            )

    @field_validator("disabled")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        unknown = [n for n in v if n not in RULES and n not in ALERTNAMES]
        if unknown:
            raise ValueError(
                f"unknown rule {unknown[0]!r}; rules are {', '.join(RULES)} and alerts {', '.join(ALERTNAMES)}"
            )
        return v

    def lifecycle(self, resolved_retention: float) -> LifecyclePolicy:
        return LifecyclePolicy(
            pending_for=self.pending_for,
            pending_for_by_rule=dict(self.pending_for_by_rule),
            keep_firing_for=self.keep_firing_for,
            resolved_retention=resolved_retention,
        )


class RouteConfig(Section):
    """One node of the routing tree; unset settings are inherited from the parent."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    receiver: str | None = None
    """Receiver of the alerts this route matches; unset: the parent's."""
    matchers: list[str] = []
    """Alertmanager matchers (`tier="critical"`, `team=~"vision|nlp"`, `severity!="info"`); all must match."""
    group_by: list[str] | None = None
    """Labels that group alerts into one notification (`['...']`: every label); unset: the parent's."""
    group_wait: Duration | None = None
    """Wait before the first notification of a new group, to gather its alerts; unset: the parent's, else `30s`."""
    group_interval: PositiveDuration | None = None
    """Wait before notifying a group again about alerts added or resolved; unset: the parent's, else `5m`."""
    repeat_interval: PositiveDuration | None = None
    """Resend a still-firing group after this long; unset: the parent's, else `4h`."""
    continue_: bool = Field(False, alias="continue")
    """After matching, go on to the next sibling routes too."""
    routes: list[RouteConfig] = []
    """Child routes, tried in order; the first that matches wins unless it has `continue`."""

    _m = field_validator("matchers")(_check_matchers)

    def build(self, parent: Route | None = None, path: str = "0") -> Route:
        receiver = self.receiver or (parent.receiver if parent else "")
        matchers = _matchers(self.matchers)
        node = Route(
            path=path,
            receiver=receiver,
            matchers=matchers,
            key=route_key(parent.key if parent else None, matchers),
            group_by=workload_grouping(self.group_by)
            if self.group_by is not None
            else (parent.group_by if parent else ()),
            group_wait=_pick(self.group_wait, parent.group_wait if parent else None, 30.0),
            group_interval=_pick(self.group_interval, parent.group_interval if parent else None, 300.0),
            repeat_interval=_pick(
                self.repeat_interval, parent.repeat_interval if parent else None, 4 * 3600.0
            ),
            continue_=self.continue_,
        )
        children = tuple(c.build(node, f"{path}.{i}") for i, c in enumerate(self.routes))
        return Route(**{**{f: getattr(node, f) for f in node.__dataclass_fields__}, "routes": children})


def _pick(own: float | None, inherited: float | None, default: float) -> float:
    if own is not None:
        return own
    return inherited if inherited is not None else default


class EmailConfig(Section):
    to: list[str] = Field(min_length=1)
    """Recipient addresses."""
    from_: str = Field("watchtower@localhost", alias="from")
    """`From:` address."""
    smarthost: str = "localhost"
    """SMTP server host."""
    port: int = Field(25, ge=1, le=65535)
    """SMTP server port (25, 587 for starttls, 465 for tls)."""
    security: str = Field("starttls", pattern=r"^(none|starttls|tls)$")
    """`none`: plain SMTP, never upgraded; `starttls`: STARTTLS required; `tls`: implicit TLS (port 465)."""
    ca_file: str | None = None
    """Verify the server against this CA bundle instead of the system store."""
    verify: bool = True
    """Verify the server's certificate (turn off only for a test server)."""
    username: str | None = None
    """SMTP AUTH user; none: no AUTH."""
    password: SecretStr | None = None
    """SMTP AUTH password; a secret: give it by `password_file`."""
    password_file: str | None = None
    """File holding `password` (e.g. a mounted Kubernetes Secret)."""
    timeout: PositiveDuration = 10.0
    """Timeout of each SMTP operation."""
    deadline: PositiveDuration = 60.0
    """Time allowed for the whole message."""
    send_resolved: bool = True
    """Also notify when alerts resolve."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _password_file(cls, data: Any) -> Any:
        return _read_secret(data, "password")

    @field_validator("to")
    @classmethod
    def _one_line(cls, v: list[str]) -> list[str]:
        for a in v:
            if "\r" in a or "\n" in a or "@" not in a:
                raise ValueError(f"{a!r} is not an email address")
        return v


class WebhookConfig(Section):
    url: str = Field(pattern=r"^https?://")
    """Endpoint receiving Alertmanager's version 4 JSON body by POST."""
    secret: SecretStr | None = None
    """Standard Webhooks signing key, `whsec_` + base64 of at least 16 bytes; signs `webhook-signature`. A secret: give it by `secret_file`. None: unsigned."""
    secret_file: str | None = None
    """File holding `secret` (e.g. a mounted Kubernetes Secret)."""
    slack_compatible: bool = False
    """Send a Slack incoming-webhook body (`text`, `blocks`) instead of Alertmanager's."""
    timeout: PositiveDuration = 10.0
    """Timeout of each POST."""
    send_resolved: bool = True
    """Also notify when alerts resolve."""

    @model_validator(mode="before")
    @classmethod
    def _secret_file(cls, data: Any) -> Any:
        return _read_secret(data, "secret")

    @field_validator("secret")
    @classmethod
    def _whsec(cls, v: SecretStr | None) -> SecretStr | None:
        if v is None:
            return v
        raw = v.get_secret_value().removeprefix("whsec_")
        try:
            key = base64.b64decode(raw, validate=True)
        except ValueError:
            raise ValueError("secret must be whsec_ followed by base64") from None
        if len(key) < 16:
            raise ValueError("secret is shorter than 16 bytes")
        return v


class ReceiverConfig(Section):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    """Receiver name, used by routes."""
    email: list[EmailConfig] = []
    """Email integrations of this receiver."""
    webhooks: list[WebhookConfig] = []
    """Webhook integrations of this receiver."""

    def channels(self) -> list[tuple[IntegrationId, EmailConfig | WebhookConfig]]:
        """Return every integration of the receiver with its configuration, in configuration order: the one
        list the integrations, their configuration digests and the senders are all built from."""
        out: list[tuple[IntegrationId, EmailConfig | WebhookConfig]] = [
            (IntegrationId(self.name, "email", i), e) for i, e in enumerate(self.email)
        ]
        out += [(IntegrationId(self.name, "webhook", i), w) for i, w in enumerate(self.webhooks)]
        return out


class InhibitConfig(Section):
    source_matchers: list[str]
    """Matchers of the alerts that inhibit."""
    target_matchers: list[str]
    """Matchers of the alerts that are muted while a source fires."""
    equal: list[str] = []
    """Labels source and target must share for the inhibition to apply."""

    _s = field_validator("source_matchers", "target_matchers")(_check_matchers)

    def build(self) -> InhibitRule:
        return InhibitRule(
            _matchers(self.source_matchers), _matchers(self.target_matchers), tuple(self.equal)
        )


class DeliveryConfig(Section):
    backoff_base: PositiveDuration = 5.0
    """First retry delay of a failed notification, doubled on each attempt."""
    backoff_cap: PositiveDuration = 600.0
    """Longest retry delay."""
    jitter: float = Field(0.2, ge=0, le=1)
    """Random fraction added to or taken from each delay."""
    max_attempts: int = Field(50, ge=1)
    """Attempts before a notification is marked failed."""
    retry_after_cap: Duration = 3600.0
    """Longest `Retry-After` honoured; `0s`: ignore `Retry-After`."""
    mode: Literal["builtin", "alertmanager", "both"] = "builtin"
    """`builtin`: Watchtower groups, routes and notifies itself; `alertmanager`: alerts are pushed to the Alertmanagers of `alerting.alertmanagers` instead; `both`: each."""


class PushConfig(Section):
    """How alerts are pushed to Alertmanager (as Prometheus does): the timings of its `--rules.alert.*`."""

    resend_interval: PositiveDuration = Field(60.0, le=60.0)
    """A firing alert is sent again this often (at most `1m`), so an Alertmanager that restarted has it again."""
    resolved_for: PositiveDuration = 900.0
    """A resolved alert is sent again, with its resolve time, for this long."""
    batch_size: int = Field(256, ge=1)
    """Alerts per `POST /api/v2/alerts`."""
    timeout: PositiveDuration = 10.0
    """Timeout of each POST."""


class RetentionConfig(Section):
    """How long the alert store keeps what it no longer acts on, before the hourly prune removes it."""

    # Alertmanager keeps expired silences 120h (--data.retention); expired ones stay listed for review.
    silences: PositiveDuration = 5 * 86400.0
    """Expired silences are kept (and listed) this long after they end."""
    delivered: PositiveDuration = 7 * 86400.0
    """Notifications are kept this long after they are delivered or given up; pending ones always stay."""


def _default_route() -> RouteConfig:
    return RouteConfig(receiver="default", group_by=["alertname", "namespace"])


class AlertingConfig(Section):
    enabled: bool = True
    """Evaluate alert rules and send notifications."""
    rules: RulesConfig = RulesConfig()
    """Thresholds of the alert rules."""
    route: RouteConfig = Field(default_factory=_default_route)
    """The routing tree's top route; it matches every alert and needs a receiver."""
    receivers: list[ReceiverConfig] = [ReceiverConfig(name="default")]
    """Named receivers, each with email and webhook integrations; the default is one receiver `default` with none."""
    inhibit_rules: list[InhibitConfig] | None = None
    """Inhibitions; none: a critical alert mutes the warning of the same workload, and WorkloadCanNeverStart
    mutes the same workload's wait and quota-blocked alerts."""
    delivery: DeliveryConfig = DeliveryConfig()
    """Retries of failed notifications, and who notifies (`mode`)."""
    alertmanagers: list[str] = []
    """Alertmanager replicas to push alerts to (`http://am-0.am:9093`, ...): each gets every alert, never one behind a load balancer."""
    push: PushConfig = PushConfig()
    """Timings of the push to `alertmanagers`."""
    store_path: str = ""
    """SQLite file of the alert store; empty: the `store.path` database."""
    resolved_retention: PositiveDuration = _LIFECYCLE.resolved_retention
    """Resolved alerts stay listed (and notifiable) this long."""
    retention: RetentionConfig = RetentionConfig()
    """How long the alert store keeps what it no longer acts on (pruned hourly)."""

    @model_validator(mode="after")
    def _receivers_exist(self) -> AlertingConfig:
        raise_problems(alerting_problems(self.model_dump(include={"route", "receivers"})))
        return self

    @field_validator("alertmanagers")
    @classmethod
    def _urls(cls, v: list[str]) -> list[str]:
        for i, url in enumerate(v):
            if not url.startswith(("http://", "https://")) or url.rstrip("/").count("/") < 2:
                raise ValueError(f"[{i}] {url!r} is not an http:// or https:// address of an Alertmanager")
        if len(set(v)) != len(v):
            raise ValueError("lists the same Alertmanager twice: it would get every alert twice")
        return v

    @model_validator(mode="after")
    def _push_has_targets(self) -> AlertingConfig:
        mode = self.delivery.mode
        if mode != "builtin" and not self.alertmanagers:
            raise ValueError(
                f"delivery.mode is {mode!r} but alertmanagers lists none: add their addresses, one per replica"
            )
        if mode == "builtin" and self.alertmanagers:
            raise ValueError(
                "alertmanagers is set but delivery.mode is 'builtin': set it to 'alertmanager' or 'both'"
            )
        return self

    def push_targets(self) -> dict[str, str]:
        """Return outbox integration → Alertmanager URL, one per replica; none in `builtin` mode."""
        if self.delivery.mode == "builtin":
            return {}
        return {f"alertmanager/push/{i}": url.rstrip("/") for i, url in enumerate(self.alertmanagers)}

    def route_tree(self) -> Route:
        return self.route.build()

    def inhibitions(self) -> tuple[InhibitRule, ...]:
        if self.inhibit_rules is None:
            return default_inhibitions()
        return tuple(i.build() for i in self.inhibit_rules)
