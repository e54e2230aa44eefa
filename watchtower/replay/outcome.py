"""What a replay gives: each job's outcome and the cluster's figures (watchtower/replay/engine.py makes them)."""

from __future__ import annotations

from dataclasses import dataclass

from .trace import TraceJob


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What became of one job in a replay."""

    id: str
    team: str
    tier: str
    priority: int
    gpus: int
    submitted: float
    started: float | None  # its first start; None: refused, or still waiting when the run ended
    finished: float | None
    waited: float  # seconds pending in all, every wait after a preemption included
    preemptions: int  # times it was preempted
    gpu_hours_lost: float  # work redone after its preemptions, in GPU-hours
    gpu_hours: float  # GPU-hours it held (the ends of its graces included)
    refused: str | None = None  # why it could never run
    deleted: float | None = (
        None  # when it left the queue unstarted (the trace's `deleted`, or people gave up)
    )


def as_observed(j: TraceJob, started: float) -> JobOutcome:
    """Return a job of the trace as it ran: waiting from submission to its observed start, then running its
    duration, never preempted (the trace says when it started, not what happened on the way)."""
    return JobOutcome(
        id=j.id,
        team=j.team,
        tier=j.tier,
        priority=j.priority,
        gpus=j.gpus,
        submitted=j.submitted,
        started=started,
        finished=started + j.duration,
        waited=started - j.submitted,
        preemptions=0,
        gpu_hours_lost=0.0,
        gpu_hours=j.gpus * j.duration / 3600.0,
    )


@dataclass(frozen=True, slots=True)
class Replay:
    """A finished replay: each job's outcome and the cluster's figures."""

    policy: str
    jobs: tuple[JobOutcome, ...]  # in the trace's order
    capacity_gpus: int
    start: float  # the first submission
    end: float  # the last event
    busy_gpu_seconds: float  # GPUs held by jobs, graces included, over [start, end]

    @property
    def utilisation(self) -> float | None:
        span = (self.end - self.start) * self.capacity_gpus
        return self.busy_gpu_seconds / span if span > 0 else None
