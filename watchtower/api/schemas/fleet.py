"""`/api/v1/fleet`: this cluster and the others of `fleet.clusters`, as their Watchtowers answer now."""

from __future__ import annotations

from typing import Literal

from .common import Body, Number


class FleetTier(Body):
    tier: str
    """the tier, as this replica's configuration names it"""
    waiting: int | None
    """workloads waiting in it (pending, partial, quota_blocked); null: the cluster has no such tier"""
    oldest_wait_seconds: Number | None
    """the longest wait of the tier; null: nothing waits"""
    warn_after_seconds: Number | None
    """the tier's warning threshold there"""
    critical_after_seconds: Number | None
    """the tier's critical threshold there"""
    severity: Literal["warning", "critical"] | None
    """how far past them the longest wait is"""


class FleetCluster(Body):
    name: str
    """the cluster's name (`cluster.name`, or `fleet.clusters[].name`)"""
    url: str
    """its Watchtower's page"""
    here: bool
    """the cluster this replica watches"""
    answered: bool
    """false: it did not answer in time, or not usably; its figures are null, never zero"""
    missing: str | None
    """why it is not shown"""
    tiers: list[FleetTier]
    """per tier of this replica's configuration (empty when missing)"""
    firing_alerts: int | None
    """alerts firing there, neither silenced nor inhibited; null: alerting is off there"""
    gpus_free: int | None
    """free GPUs of schedulable nodes"""
    gpus_idle: int | None
    """GPUs allocated but idle (DCGM via its Prometheus); null: not measured there"""
    notes: list[str]
    """what it answered only in part (a tier it lacks)"""


class Fleet(Body):
    clusters: list[FleetCluster]
    """this cluster first, then `fleet.clusters` in their order"""
