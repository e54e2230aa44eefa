"""The change log of a cluster state, and where each of its readers left off.

A part `ClusterState` holds (`state.log`): every change notes the workloads it touches, and an
evaluator (queue.py, running.py, alerts/holders.py) re-derives only those since its last read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .workloads import WorkloadKey


@dataclass(slots=True)
class ChangeLog:
    # Workloads touched since the log began, in order: an evaluator reads it from where it left off and
    # re-derives only those. `epoch` moves when every workload may have changed (a namespace's team, the
    # priority classes) or when the log was cut short; an evaluator then starts over.
    changes: list[WorkloadKey] = field(default_factory=list)
    changes_base: int = 0  # position of changes[0] since the state was made
    epoch: int = 0
    max_changes: int = 500_000

    def touch(self, key: WorkloadKey) -> None:
        """Note that something a workload's status is derived from has changed."""
        changes = self.changes
        changes.append(key)
        if len(changes) > self.max_changes:
            self.changes_base += len(changes)
            changes.clear()
            self.epoch += 1

    def touch_all(self) -> None:
        self.epoch += 1

    @property
    def changes_end(self) -> int:
        """The position after the last entry: where a reader that has read everything stands."""
        return self.changes_base + len(self.changes)

    def forget_before(self, position: int) -> None:
        """Drop the entries before `position`, read by every reader that reads at each tick. Without this
        the log kept every change until `max_changes` (17 minutes of a 500 events/s feed, a steady RSS
        climb, then a start-over of every reader). A reader still behind `position` starts over, as after
        a cut."""
        n = min(position, self.changes_end) - self.changes_base
        if n > 0:
            del self.changes[:n]
            self.changes_base += n


@dataclass(slots=True)
class ChangeCursor:
    """Where one reader of a state's change log left off (an index that follows the state, not the evaluator)."""

    position: int = -1
    epoch: int = -1

    def read(self, log: ChangeLog) -> set[WorkloadKey] | None:
        """Return the workloads touched since the last read, or None when the reader must start over."""
        end = log.changes_end
        fresh = self.epoch == log.epoch and self.position >= log.changes_base
        out = set(log.changes[self.position - log.changes_base :]) if fresh else None
        self.position, self.epoch = end, log.epoch
        return out

    def needs(self, log: ChangeLog) -> int:
        """Return the position of `log` from which this reader still needs the entries (the end when it
        will start over anyway). For a log of the state the reader last read."""
        return self.position if self.epoch == log.epoch else log.changes_end
