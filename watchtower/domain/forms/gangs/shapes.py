"""The gangs form's JSON, key by key (domain/forms/shapes.py): what present.py returns, as /openapi.json
documents it."""

from __future__ import annotations

from typing import TypedDict


class GangsWorkload(TypedDict):
    """A workload's keys of the gangs form."""

    pod_group: str | None
    """the PodGroup (upstream or Volcano) it waits in"""
    volcano_queue: str | None
    """the Volcano Queue its group waits in"""


class VolcanoQueue(TypedDict):
    """A Volcano Queue (`scheduling.volcano.sh/v1beta1`): a team's entitlement where Volcano schedules, in GPUs
    (`nvidia.com/gpu`; volcano-sh/apis pkg/apis/scheduling/v1beta1/types.go QueueSpec, QueueStatus)."""

    name: str
    """the Queue (cluster-scoped)"""
    weight: int
    """`spec.weight`: its share against the other queues when GPUs are divided"""
    state: str | None
    """`status.state`: `Open`, `Closed`, `Closing`, `Unknown`"""
    gpus_capability: int | None
    """`spec.capability`: the most it may ever use (null: no limit set)"""
    gpus_deserved: int | None
    """`spec.deserved`: its fair share; above it, its GPUs may be reclaimed by other queues"""
    gpus_guarantee: int | None
    """`spec.guarantee.resource`: reserved for it, never lent"""
    gpus_allocated: int | None
    """`status.allocated`: what its running work holds now"""
    namespaces: list[str]
    """the namespaces whose Volcano PodGroups or PaddleJobs (`spec.schedulingPolicy.queue`) name it"""
    teams: list[str]
    """those namespaces' teams"""


class GangsSections(TypedDict):
    """The queue document's sections of the gangs form."""

    volcano_queues: list[VolcanoQueue]
    """every Volcano Queue, whatever the filters: the teams' entitlement where Volcano schedules"""
