"""What bound pods use on each node besides GPUs (CPU, memory, pod slots), and which schedulers bound them.

Kept up to date pod by pod beside `ClusterState.gpus_used`, so that asking whether a pod fits somewhere
never walks the 150,000 pods. A pod counts while it holds its node's resources: bound and not finished,
terminating ones included (DESIGN §3, the capacity model).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from watchtower.domain.records import Pod

# What the API server writes into an empty `spec.schedulerName` (SetDefaults_PodSpec in
# kubernetes/kubernetes pkg/apis/core/v1/defaults.go; v1.DefaultSchedulerName in
# staging/src/k8s.io/api/core/v1/types.go). Pod records keep "" for it, to cost nothing on most pods.
DEFAULT_SCHEDULER = "default-scheduler"


def _add(d: dict[str, int], key: str, n: int) -> None:
    left = d.get(key, 0) + n
    if left > 0:
        d[key] = left
    else:
        d.pop(key, None)


@dataclass(slots=True)
class NodeUse:
    cpu_millis: dict[str, int] = field(default_factory=dict)  # by node
    memory_bytes: dict[str, int] = field(default_factory=dict)  # by node
    pods: dict[str, int] = field(default_factory=dict)  # by node
    # Bound pods per `spec.schedulerName` ("" for the default): a name no bound pod carries is served by
    # no scheduler this cluster has shown us.
    schedulers: dict[str, int] = field(default_factory=dict)
    # Waiting pods nominated to each node, by uid: kube-scheduler counts them as placed there when it
    # filters a pod of lower or equal priority, so what they ask is not free for such a pod.
    promised: dict[str, dict[str, Pod]] = field(default_factory=dict)

    def apply(self, old: Pod | None, new: Pod | None) -> None:
        """Take a pod's change: what the old object held is given back, what the new one holds is taken."""
        if old is not None and old.holds_resources:
            self._count(old, -1)
        if new is not None and new.holds_resources:
            self._count(new, 1)
        if old is not None and old.nominated_node and old.waiting:
            there = self.promised.get(old.nominated_node)
            if there is not None:
                there.pop(old.uid, None)
                if not there:
                    del self.promised[old.nominated_node]
        if new is not None and new.nominated_node and new.waiting:
            self.promised.setdefault(new.nominated_node, {})[new.uid] = new

    def _count(self, p: Pod, sign: int) -> None:
        node = p.node
        if p.cpu_millis:
            _add(self.cpu_millis, node, sign * p.cpu_millis)
        if p.memory_bytes:
            _add(self.memory_bytes, node, sign * p.memory_bytes)
        _add(self.pods, node, sign)
        _add(self.schedulers, p.scheduler, sign)

    def serves(self, scheduler: str) -> bool:
        """Return True when some bound pod names this scheduler ("" or default-scheduler: the default)."""
        name = "" if scheduler == DEFAULT_SCHEDULER else scheduler
        return self.schedulers.get(name, 0) > 0
