"""Alerts, silences and receivers, in Alertmanager's API shapes (camelCase keys, millisecond times)."""

from __future__ import annotations

from watchtower.domain.alerts.model import AlertState
from watchtower.domain.alerts.silences import SilenceState

from .common import Body, Time


class Alert(Body):
    """An alert Watchtower's rules raised: pending, firing, or recently resolved."""

    fingerprint: str
    """stable hash of the labels, the cluster label left out (the alert's identity)"""
    state: AlertState
    """`pending` (active, not yet for its `for` duration), `firing`, `resolved`"""
    labels: dict[str, str]
    """`alertname`, `severity`, and what the rule names (`namespace`, `workload`, `tier`, ...)"""
    annotations: dict[str, str]
    """`summary`, `description`, `runbook_url`, ... (free text)"""
    activeAt: Time
    """when the condition first held"""
    startsAt: Time | None
    """when it fired (null while pending)"""
    endsAt: Time | None
    """when it resolved"""
    silencedBy: list[str]
    """ids of the silences muting it"""
    inhibitedBy: list[str]
    """fingerprints of the alerts inhibiting it"""


class Matcher(Body):
    name: str
    """the label"""
    value: str
    """the value, or the regular expression when `isRegex` (RE2, Alertmanager's syntax, anchored at both ends)"""
    isRegex: bool
    """`value` is a regular expression (`=~`, `!~`)"""
    isEqual: bool
    """false for `!=` and `!~`"""


class SilenceStatus(Body):
    state: SilenceState
    """`pending` (starts in the future), `active`, `expired`"""


class Silence(Body):
    """Mutes the alerts whose labels match every matcher, from `startsAt` to `endsAt`."""

    id: str
    """the silence's id"""
    status: SilenceStatus
    """its state now"""
    matchers: list[Matcher]
    """every one must match"""
    startsAt: Time
    """when it starts muting"""
    endsAt: Time
    """when it stops (the time it was expired, once expired early)"""
    createdBy: str
    """who created it"""
    comment: str
    """why"""
    createdAt: Time
    """when it was created"""
    updatedAt: Time
    """when it was last changed"""


class _SilenceId(Body):
    silenceID: str
    """the same as `id`"""


# The first key of the answer, as before the models: pydantic orders the fields of the bases last-first.
class CreatedSilence(Silence, _SilenceId):
    """The silence just created, with its id first, as Alertmanager's API gives it."""


class IntegrationStatus(Body):
    """One way a receiver delivers (an e-mail address list, a webhook)."""

    id: str
    """`<receiver>/<type>/<index>`"""
    type: str
    """`email` or `webhook`"""
    disabled: bool
    """deliveries stopped after the endpoint answered 410 Gone; held back until it is enabled again"""
    disabledReason: str | None
    """why"""
    disabledAt: Time | None
    """since when"""


class Receiver(Body):
    name: str
    """as in `alerting.receivers`"""
    integrations: list[IntegrationStatus]
    """its ways of delivering, and whether each is disabled"""


class _Enabled(Body):
    enabled: list[str]
    """ids of the integrations enabled again (empty when none was disabled)"""


class EnabledReceiver(Receiver, _Enabled):
    """The receiver after `enable`, what was enabled first."""
