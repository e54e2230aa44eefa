"""The `leader_election:` section: whether replicas elect a leader on a Lease, which Lease, how fast."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from watchtower.domain.leader import LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD, Timings

from .consistency import raise_problems
from .durations import PositiveDuration


class Section(BaseModel):
    # As model.Section; not imported from there because model.py imports this module.
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class LeaderElectionConfig(Section):
    """Several replicas, one leader: only the Lease holder evaluates alerts, delivers notifications and pushes to Alertmanager; every replica watches and serves the API."""

    enabled: bool = False
    """Elect a leader on a `coordination.k8s.io/v1` Lease; off: this process is the leader (one replica)."""
    lease_name: str = Field("watchtower", pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
    """Name of the Lease (deploy/base/rbac.yaml lets Watchtower update only the one named `watchtower`)."""
    lease_namespace: str | None = Field(None, pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    """Namespace of the Lease; unset: the pod's own (its service-account mount)."""
    lease_duration: PositiveDuration = LEASE_DURATION
    """How long a Lease not renewed keeps the other replicas waiting: the longest failover after a crash (whole seconds, rounded up)."""
    renew_deadline: PositiveDuration = RENEW_DEADLINE
    """A leader that could not renew for this long stops leading (and sending); shorter than lease_duration, the difference absorbing clock skew between nodes."""
    retry_period: PositiveDuration = RETRY_PERIOD
    """How often the leader renews and the others try to acquire (they add up to 20 % at random)."""

    @model_validator(mode="after")
    def _ordered(self) -> LeaderElectionConfig:
        raise_problems([("", p) for p in self.timings().problems()])
        return self

    def timings(self) -> Timings:
        return Timings(self.lease_duration, self.renew_deadline, self.retry_period)
