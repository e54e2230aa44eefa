"""The kinds of API object Watchtower reads, and where the API server serves each of them.

One table for the whole service: the Kubernetes adapter lists and watches `WATCHED`, the simulator
serves the same kinds, and the Ingestor binds each one to its decoder and to the `ClusterState` tables
that hold it (services/ingest.py). An object of any other kind is counted and ignored.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of API object: its name and its cluster-wide collection (group, version, plural)."""

    name: str
    group: str  # "" for the core API group
    version: str
    plural: str
    # A CRD that may not be installed: absent is no error, and readiness does not wait for its LIST.
    optional: bool = False

    @property
    def path(self) -> str:
        """Return the cluster-wide collection path, e.g. /api/v1/pods, /apis/scheduling.k8s.io/v1/..."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return f"{root}/{self.plural}"


NAMESPACE = Kind("Namespace", "", "v1", "namespaces")
PRIORITY_CLASS = Kind("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses")
NODE = Kind("Node", "", "v1", "nodes")
RESOURCE_QUOTA = Kind("ResourceQuota", "", "v1", "resourcequotas")
# The controllers whose pods a ResourceQuota refuses (their FailedCreate names them): work that has no
# pod is read from their pod template (DESIGN §3.15). A ReplicaSet's owner names its Deployment.
JOB = Kind("Job", "batch", "v1", "jobs")
REPLICA_SET = Kind("ReplicaSet", "apps", "v1", "replicasets")
PADDLE_JOB = Kind("PaddleJob", "batch.paddlepaddle.org", "v1", "paddlejobs", optional=True)
# Read for its owner: a TrainJob's pods name only the JobSet (DESIGN §3.17).
JOBSET = Kind("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets", optional=True)
POD = Kind("Pod", "", "v1", "pods")
EVENT = Kind("Event", "", "v1", "events")

# In the order a whole picture is best applied (a dump, the simulator's first LIST): what pods and events
# refer to first (classes, controllers), and events after the pods they name.
WATCHED: tuple[Kind, ...] = (
    NAMESPACE,
    PRIORITY_CLASS,
    NODE,
    RESOURCE_QUOTA,
    JOB,
    REPLICA_SET,
    PADDLE_JOB,
    JOBSET,
    POD,
    EVENT,
)
