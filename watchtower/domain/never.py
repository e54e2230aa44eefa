"""Work that can never start as the cluster is configured, told apart from work waiting for busy nodes.

Three things say so, each with its own numbers (`NeverStart`):

- the nodes: no schedulable node could hold one of its pods even empty (its GPUs, CPU or memory above
  every schedulable node's allocatable, or a nodeSelector no schedulable node's labels match), or its gang's
  minimum of such pods cannot be placed on all the schedulable nodes at once even empty. Taints are not
  weighed: the pod record keeps no tolerations, so a node tainted against the pod still counts as one that
  could hold it (never is then missed, never wrongly said). Nodes are compared by allocatable, not by what
  runs on them: a pod asking 8 GPUs on busy 8-GPU nodes is waiting, not never.
- a ResourceQuota: its FailedCreate refusal says one pod asks more than the quota's `hard` (kube-apiserver's
  "exceeded quota: q, requested: r=16, used: r=0, limited: r=8"): no amount of waiting frees that.
- Kueue: `QuotaReserved=False` reason `ExceedsMaxQuota` (v0.19+), or any reason whose message says a pod
  set's request is "> maximum capacity" (the same words under the older `Pending`), i.e. more than its
  ClusterQueue can ever give, nominal quota and borrowing together (kueue pkg/scheduler/flavorassigner
  flavorassigner.go fitsResourceQuota); and `NoMatchingFlavor`: no ResourceFlavor of its ClusterQueue
  matches its node selector, affinity or tolerations (checkFlavorForPodSets).

Pure: the node inventory is handed in, and its verdicts per pod shape are kept while it is the same
inventory (a queue of 20,000 workloads has a few dozen shapes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation

import msgspec

from watchtower.domain.records import Node

GPU = "nvidia.com/gpu"
NODES = "nodes"  # NeverStart.source when the nodes say so

# NeverStart.reason values: what makes it never.
NODE_RESOURCES = "node_resources"  # one pod asks more than any schedulable node has
NODE_SELECTOR = "node_selector"  # no schedulable node has the labels its pods select
GANG = "gang"  # its gang's minimum of pods cannot be placed on the nodes at once
QUOTA_HARD = "quota_hard"  # a ResourceQuota's hard is below one pod's request
KUEUE_MAX_QUOTA = "kueue_max_quota"  # more than its ClusterQueue can ever give
KUEUE_NO_FLAVOR = "kueue_no_matching_flavor"  # no flavor of its ClusterQueue fits its pods
REASONS = (NODE_RESOURCES, NODE_SELECTOR, GANG, QUOTA_HARD, KUEUE_MAX_QUOTA, KUEUE_NO_FLAVOR)


class NeverStart(msgspec.Struct, frozen=True, gc=False):
    """Why a workload can never start as the cluster is configured, in its own numbers."""

    reason: str  # one of REASONS
    asks: str  # "32 GPUs", "16 GPUs per pod", "nodes labelled gpu=h100"
    limit: str  # "ClusterQueue research-cq gives at most 16"
    source: str  # what says so: "nodes", "ResourceQuota gpu-quota", "ClusterQueue research-cq"

    @property
    def text(self) -> str:
        """Return the words the page, the JSON, analyze and why say."""
        return f"can never start as configured: asks {self.asks}, {self.limit}"


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def _cpu(millis: int) -> str:
    return f"{millis // 1000} CPU" if millis % 1000 == 0 else f"{millis}m CPU"


def _bytes(b: int) -> str:
    for unit, size in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20)):
        if b >= size:
            v = b / size
            return f"{v:.0f}{unit}" if v == int(v) else f"{v:.1f}{unit}"
    return f"{b} bytes"


class PodShape(msgspec.Struct, frozen=True, gc=False):
    """What one pod asks of a node: GPUs (device plugin and DRA), CPU, memory, the labels it selects."""

    gpus: int = 0
    cpu_millis: int = 0
    memory_bytes: int = 0
    selector: tuple[tuple[str, str], ...] = ()


class _NodeRoom(msgspec.Struct, frozen=True, gc=False):
    gpus: int
    cpu_millis: int  # 0: not known (not weighed)
    memory_bytes: int
    labels: Mapping[str, str]


class NodeInventory:
    """The schedulable nodes' allocatable, and the verdicts worked out from it per pod shape.

    Made once per change of the nodes (`ClusterState.inventory`): verdicts are kept only while it lives."""

    __slots__ = ("_forgot", "_memo", "_rooms", "known")

    def __init__(self, nodes: Iterable[Node], dra_gpus: Mapping[str, int]) -> None:
        self._rooms = tuple(
            _NodeRoom(n.gpus + dra_gpus.get(n.name, 0), n.cpu_millis, n.memory_bytes, n.labels)
            for n in nodes
            if not n.unschedulable
        )
        # No schedulable GPU node listed (not yet, not readable, or every device plugin restarting, which
        # reports 0 GPUs for a while): nothing can be said of never.
        self.known = any(r.gpus > 0 for r in self._rooms)
        self._memo: dict[tuple[PodShape, int], NeverStart | None] = {}
        self._forgot = False  # the memo was cleared once: it no longer holds every verdict given

    def agrees_with(self, older: NodeInventory) -> bool:
        """Return True when this inventory gives every verdict `older` gave alike: then no workload's never
        changes with the nodes (a node of a size already there added, a label no pod selects changed), and
        nothing needs working out again. A few dozen shapes, checked once per change of the nodes."""
        if older._forgot or self.known != older.known:
            return False
        return all(self.verdict(shape, gang) == said for (shape, gang), said in older._memo.items())

    def verdict(self, shape: PodShape, gang: int = 0) -> NeverStart | None:
        """Return why a pod of this shape (a gang of `gang` of them, 0: not a gang) can never be placed,
        or None when the nodes could hold it (or the inventory says nothing)."""
        if not self.known:
            return None
        key = (shape, gang)
        memo = self._memo
        if key in memo:
            return memo[key]
        if len(memo) > 10_000:  # shapes of long-gone work
            memo.clear()
            self._forgot = True
        got = memo[key] = self._work_out(shape, gang)
        return got

    def _work_out(self, shape: PodShape, gang: int) -> NeverStart | None:
        sel = shape.selector
        matching = [r for r in self._rooms if all(r.labels.get(k) == v for k, v in sel)]
        if not matching:
            labels = ", ".join(f"{k}={v}" for k, v in sel)
            return NeverStart(
                NODE_SELECTOR, f"nodes labelled {labels}", "no schedulable node has those labels", NODES
            )
        per_node = [_fits(r, shape) for r in matching]
        if not any(per_node):
            return _resource_words(shape, matching)
        if gang > 1:
            room = min(sum(per_node), _ENDLESS)
            if room < gang:
                return NeverStart(
                    GANG,
                    f"{gang} pods of {_shape_words(shape)} at once",
                    f"the schedulable nodes hold at most {room} such pods even empty",
                    NODES,
                )
        return None


def _fits(r: _NodeRoom, s: PodShape) -> int:
    """Return how many pods of shape `s` an empty node holds (CPU or memory the node does not report are
    not weighed; a pod asking nothing a node counts fits without end)."""
    n = _ENDLESS
    if s.gpus > 0:
        n = r.gpus // s.gpus
    if s.cpu_millis > 0 and r.cpu_millis > 0:
        n = min(n, r.cpu_millis // s.cpu_millis)
    if s.memory_bytes > 0 and r.memory_bytes > 0:
        n = min(n, r.memory_bytes // s.memory_bytes)
    return n


_ENDLESS = 1 << 30


def _shape_words(s: PodShape) -> str:
    parts = [_gpus(s.gpus)] if s.gpus else []
    if s.cpu_millis:
        parts.append(_cpu(s.cpu_millis))
    if s.memory_bytes:
        parts.append(_bytes(s.memory_bytes))
    return " + ".join(parts) or "nothing"


def _resource_words(s: PodShape, rooms: list[_NodeRoom]) -> NeverStart:
    top_gpus = max(r.gpus for r in rooms)
    if s.gpus > top_gpus:
        return NeverStart(
            NODE_RESOURCES,
            f"{_gpus(s.gpus)} per pod",
            f"the largest schedulable node has {top_gpus}",
            NODES,
        )
    top_cpu = max(r.cpu_millis for r in rooms)
    if s.cpu_millis > top_cpu > 0:
        return NeverStart(
            NODE_RESOURCES,
            f"{_cpu(s.cpu_millis)} per pod",
            f"the largest schedulable node has {_cpu(top_cpu)}",
            NODES,
        )
    top_mem = max(r.memory_bytes for r in rooms)
    if s.memory_bytes > top_mem > 0:
        return NeverStart(
            NODE_RESOURCES,
            f"{_bytes(s.memory_bytes)} of memory per pod",
            f"the largest schedulable node has {_bytes(top_mem)}",
            NODES,
        )
    return NeverStart(
        NODE_RESOURCES,
        f"{_shape_words(s)} per pod",
        "no schedulable node has all of them at once",
        NODES,
    )


# ---- ResourceQuota -----------------------------------------------------------------------------------

_QTY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(1 << 10),
    "Mi": Decimal(1 << 20),
    "Gi": Decimal(1 << 30),
    "Ti": Decimal(1 << 40),
    "Pi": Decimal(1 << 50),
    "Ei": Decimal(1 << 60),
}


def quantity(text: str) -> Decimal | None:
    """Return a Kubernetes quantity ("16", "64Gi", "500m", "1e3") as a number; None when it is not one."""
    m = _QTY.match(text.strip())
    if m is None:
        return None
    try:
        return Decimal(m.group(1)) * _SUFFIX[m.group(2) or ""]
    except InvalidOperation:
        return None


def _is_gpu(resource: str) -> bool:
    """`requests.nvidia.com/gpu`, `limits.nvidia.com/gpu` or `nvidia.com/gpu`: a quota's name for GPUs."""
    return resource.removeprefix("requests.").removeprefix("limits.") == GPU


def quota_never(
    quota: str, requested: Mapping[str, str], limited: Mapping[str, str], hard_gpus_now: int | None = None
) -> tuple[NeverStart | None, list[str]]:
    """Return why a refused pod can never be created under ResourceQuota `quota` (a resource whose request
    alone is above the quota's hard), and the resources whose quantities could not be read (skipped).

    `hard_gpus_now` is the quota's GPU hard as listed now: raised since the refusal to what the pod asks,
    the refusal is history the controller's next try will show, not never."""
    unreadable: list[str] = []
    for r in sorted(requested, key=lambda r: (GPU not in r, r)):  # GPUs first: what the page is about
        if r not in limited:
            continue
        want, hard = quantity(requested[r]), quantity(limited[r])
        if want is None or hard is None:
            unreadable.append(r)
            continue
        if want > hard:
            if _is_gpu(r) and hard_gpus_now is not None and hard_gpus_now >= want:
                continue
            if _is_gpu(r):
                asks, most = _gpus(int(want)), str(int(hard))
            else:
                asks, most = f"{requested[r]} {r}", limited[r]
            limit = f"ResourceQuota {quota} allows at most {most}"
            return NeverStart(QUOTA_HARD, f"{asks} per pod", limit, f"ResourceQuota {quota}"), unreadable
    return None, unreadable


# ---- Kueue ---------------------------------------------------------------------------------------------

# v0.14+ (flavorassigner.go fitsResourceQuota): "insufficient quota for nvidia.com/gpu in flavor f,
# previously considered podsets requests (0) + current podset request (32) > maximum capacity (16)";
# before: "insufficient quota for cpu in flavor f, request > maximum capacity (3 > 2)".
_MAX_NOW = re.compile(
    r"insufficient quota for (?P<res>\S+) in flavor (?P<flavor>\S+), previously considered podsets requests "
    r"\((?P<prev>[^)]*)\) \+ current podset request \((?P<cur>[^)]*)\) > maximum capacity \((?P<max>[^)]*)\)"
)
_MAX_OLD = re.compile(
    r"insufficient quota for (?P<res>\S+) in flavor (?P<flavor>\S+), request > maximum capacity "
    r"\((?P<cur>[^ )]+) > (?P<max>[^)]+)\)"
)
EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
NO_MATCHING_FLAVOR = "NoMatchingFlavor"


def kueue_never(reason: str, message: str, cluster_queue: str, gpus: int) -> tuple[NeverStart | None, bool]:
    """Return why a Workload Kueue holds can never be admitted to its ClusterQueue, from its
    QuotaReserved reason and message, and whether a message that should say so could not be read
    (ExceedsMaxQuota with no numbers Kueue writes: counted as a skip; the reason alone still says never)."""
    where = f"ClusterQueue {cluster_queue}" if cluster_queue else "its ClusterQueue"
    source = f"ClusterQueue {cluster_queue}" if cluster_queue else "ClusterQueue ?"
    if reason == NO_MATCHING_FLAVOR:
        return NeverStart(
            KUEUE_NO_FLAVOR,
            _gpus(gpus) if gpus else "its pods",
            f"no ResourceFlavor of {where} matches its pods' node selector, affinity or tolerations",
            source,
        ), False
    found = _max_quota(message)
    if found is not None:
        res, want, most = found
        if res == GPU:
            w, m = quantity(want), quantity(most)
            if w is not None and m is not None:
                return NeverStart(
                    KUEUE_MAX_QUOTA, _gpus(int(w)), f"{where} gives at most {int(m)}", source
                ), False
        return NeverStart(KUEUE_MAX_QUOTA, f"{want} {res}", f"{where} gives at most {most}", source), False
    if reason == EXCEEDS_MAX_QUOTA:
        asks = _gpus(gpus) if gpus else "more than it can give"
        return NeverStart(KUEUE_MAX_QUOTA, asks, f"{where} can never give that much", source), True
    return None, False


def _max_quota(message: str) -> tuple[str, str, str] | None:
    """Return (resource, asked, maximum) of the first "> maximum capacity" reason, GPUs first."""
    found: list[tuple[str, str, str]] = []
    for m in _MAX_NOW.finditer(message):
        prev, cur = quantity(m.group("prev")), quantity(m.group("cur"))
        want = m.group("cur")
        if prev is not None and cur is not None and prev > 0:
            want = _plain(prev + cur)
        found.append((m.group("res"), want, m.group("max")))
    for m in _MAX_OLD.finditer(message):
        found.append((m.group("res"), m.group("cur"), m.group("max")))
    if not found:
        return None
    return min(found, key=lambda f: f[0] != GPU)


def _plain(d: Decimal) -> str:
    return str(int(d)) if d == int(d) else str(d.normalize())
