"""The kinds of API object Watchtower reads, and where the API server serves each of them.

The rows of the forms that ship with Watchtower; each form registers its own (domain/forms/<name>/form.py),
and `WATCHED` is composed from the registered forms (domain/forms/registry.py). The Kubernetes adapter
lists and watches exactly those, the simulator serves them, each form's decoder reads its own, and the
Ingestor binds each by name to the decoder and to the state's part that holds it. The shipped RBAC reads
exactly these (tests/deploy/test_rbac_kinds.py). An object of any other kind is counted and ignored.
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
    # Where it comes in a whole picture (a dump, a first LIST): 0 for what pods refer to (classes,
    # controllers, queues), 1 for pods, 2 for what names pods (events). See registry.WATCHED.
    stage: int = 0

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
# (k8s.io/api scheduling/v1alpha2/types.go), 1.37 at v1beta1 with the same fields Watchtower reads
# (k8s.io/api v0.37.2 scheduling/v1beta1/types.go). Off by default still, hence optional; the newest first.
WORKLOAD = Kind(
    "Workload",
    "scheduling.k8s.io",
    "v1beta1",
    "workloads",
    optional=True,
    fallback_versions=("v1alpha2", "v1alpha1"),
)
POD_GROUP = Kind(
    "PodGroup", "scheduling.k8s.io", "v1beta1", "podgroups", optional=True, fallback_versions=("v1alpha2",)
)
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
POD = Kind("Pod", "", "v1", "pods", stage=1)
EVENT = Kind("Event", "", "v1", "events", stage=2)
