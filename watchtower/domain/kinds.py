"""The kinds of API object Watchtower reads, and where the API server serves each of them.

One table for the whole service: the Kubernetes adapter lists and watches `WATCHED`, the simulator
serves the same kinds, each queue form's decoder reads its own (adapters/kube/forms/, checked against
this table), and the Ingestor binds each one by name to the decoder and to the state's part that holds
it (`ClusterState.bindings()`). The shipped RBAC reads exactly these (tests/deploy/test_rbac_kinds.py).
An object of any other kind is counted and ignored.
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
    # Older versions a cluster may serve instead, newest first: the source uses the first one served.
    fallback_versions: tuple[str, ...] = ()
    # The kind as the API server spells it, when `name` must differ (Volcano's PodGroup beside upstream's).
    api_kind: str = ""

    @property
    def path(self) -> str:
        """Return the cluster-wide collection path, e.g. /api/v1/pods, /apis/scheduling.k8s.io/v1/..."""
        return self.path_of(self.version)

    def path_of(self, version: str) -> str:
        """Return the cluster-wide collection path of this kind at one of its versions."""
        root = f"/apis/{self.group}/{version}" if self.group else f"/api/{version}"
        return f"{root}/{self.plural}"

    @property
    def versions(self) -> tuple[str, ...]:
        """Return every version the kind may be served at, the preferred one first."""
        return (self.version, *self.fallback_versions)


NAMESPACE = Kind("Namespace", "", "v1", "namespaces")
PRIORITY_CLASS = Kind("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses")
NODE = Kind("Node", "", "v1", "nodes")
RESOURCE_QUOTA = Kind("ResourceQuota", "", "v1", "resourcequotas")
# The controllers whose pods a ResourceQuota refuses (their FailedCreate names them): work that has no
# pod is read from their pod template (DESIGN §3.15). A ReplicaSet's owner names its Deployment.
JOB = Kind("Job", "batch", "v1", "jobs")
REPLICA_SET = Kind("ReplicaSet", "apps", "v1", "replicasets")
PADDLE_JOB = Kind("PaddleJob", "batch.paddlepaddle.org", "v1", "paddlejobs", optional=True)
# Upstream gang scheduling (feature gate GenericWorkload, DESIGN §3.14): Kubernetes 1.35 serves Workload
# at v1alpha1 (its spec.podGroups), 1.36 at v1alpha2 (spec.podGroupTemplates) beside a PodGroup object
# (k8s.io/api scheduling/v1alpha2/types.go). Alpha APIs: absent on most clusters, hence optional.
WORKLOAD = Kind(
    "Workload", "scheduling.k8s.io", "v1alpha2", "workloads", optional=True, fallback_versions=("v1alpha1",)
)
POD_GROUP = Kind("PodGroup", "scheduling.k8s.io", "v1alpha2", "podgroups", optional=True)
# Volcano's own (volcano-sh/apis pkg/apis/scheduling/v1beta1/types.go): its PodGroup is named apart
# from upstream's, its Queue is cluster-scoped.
VOLCANO_POD_GROUP = Kind(
    "VolcanoPodGroup", "scheduling.volcano.sh", "v1beta1", "podgroups", optional=True, api_kind="PodGroup"
)
VOLCANO_QUEUE = Kind(
    "VolcanoQueue", "scheduling.volcano.sh", "v1beta1", "queues", optional=True, api_kind="Queue"
)
# Read for its owner: a TrainJob's pods name only the JobSet (DESIGN §3.17).
JOBSET = Kind("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets", optional=True)
# Dynamic Resource Allocation (DESIGN §3.16): GA at v1 since 1.34, which still serves v1beta2 of the same
# shape (k8s.io/api resource/v1beta2). Optional: a cluster without the API serves none of them.
DEVICE_CLASS = Kind("DeviceClass", "resource.k8s.io", "v1", "deviceclasses", True, ("v1beta2",))
RESOURCE_CLAIM = Kind("ResourceClaim", "resource.k8s.io", "v1", "resourceclaims", True, ("v1beta2",))
RESOURCE_CLAIM_TEMPLATE = Kind(
    "ResourceClaimTemplate", "resource.k8s.io", "v1", "resourceclaimtemplates", True, ("v1beta2",)
)
RESOURCE_SLICE = Kind("ResourceSlice", "resource.k8s.io", "v1", "resourceslices", True, ("v1beta2",))
# Kueue (sigs.k8s.io/kueue apis/kueue/v1beta2, v1beta1 before v0.15): a queued job is suspended with no
# pods; its Workload (named apart from upstream's) says why. ClusterQueue and WorkloadPriorityClass are
# cluster-scoped.
_KUEUE = "kueue.x-k8s.io"
WORKLOAD_PRIORITY_CLASS = Kind(
    "WorkloadPriorityClass", _KUEUE, "v1beta2", "workloadpriorityclasses", True, ("v1beta1",)
)
CLUSTER_QUEUE = Kind("ClusterQueue", _KUEUE, "v1beta2", "clusterqueues", True, ("v1beta1",))
LOCAL_QUEUE = Kind("LocalQueue", _KUEUE, "v1beta2", "localqueues", True, ("v1beta1",))
KUEUE_WORKLOAD = Kind("KueueWorkload", _KUEUE, "v1beta2", "workloads", True, ("v1beta1",), "Workload")
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
    WORKLOAD,
    POD_GROUP,
    VOLCANO_POD_GROUP,
    VOLCANO_QUEUE,
    JOBSET,
    DEVICE_CLASS,
    RESOURCE_SLICE,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_CLAIM,
    WORKLOAD_PRIORITY_CLASS,
    CLUSTER_QUEUE,
    LOCAL_QUEUE,
    KUEUE_WORKLOAD,
    POD,
    EVENT,
)


def kind_named(kind: str, api_version: str) -> str:
    """Return the name a watched kind goes by for an object's kind and apiVersion (a dump mixes them):
    Volcano's PodGroup → VolcanoPodGroup, Kueue's Workload → KueueWorkload; any other kind is its own name."""
    group = api_version.rpartition("/")[0]
    for k in WATCHED:
        if k.api_kind == kind and k.group == group:
            return k.name
    return kind
