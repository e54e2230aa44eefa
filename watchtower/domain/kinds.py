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
POD = Kind("Pod", "", "v1", "pods")
EVENT = Kind("Event", "", "v1", "events")
PADDLE_JOB = Kind("PaddleJob", "batch.paddlepaddle.org", "v1", "paddlejobs", optional=True)

# In the order a whole picture is best applied (a dump, the simulator's first LIST): what pods refer to
# first, and events after the pods they name. PADDLE_JOB is not watched: nothing reads PaddleJob objects
# yet (their pods are grouped by ownerReference), and a cluster-wide watch of them would be paid for
# nothing. The issue that gives them a reader adds them here, with a binding in the Ingestor.
WATCHED: tuple[Kind, ...] = (NAMESPACE, PRIORITY_CLASS, NODE, RESOURCE_QUOTA, POD, EVENT)
