"""Kubernetes JSON → domain records, by typed partial decoding (the structs are in `wire`).

Each list item is decoded on its own: one malformed object is reported and skipped, never the whole page.
Longer than most modules because the pod record is built in one inline pass (`_pod`), the budget of a
150,000-pod LIST; the other kinds are short.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, TypeVar, overload

import msgspec
from msgspec.structs import astuple

from watchtower.domain.dra import GPU_DEVICE_CLASS, DeviceClass, ResourceClaim, ResourceSlice
from watchtower.domain.gangs import (
    REF_PODGROUP,
    REF_VOLCANO,
    REF_WORKLOAD,
    VOLCANO_GROUP_ANNOTATION,
    Gang,
    GangWorkload,
    GroupRef,
    VolcanoQueue,
)
from watchtower.domain.kueue import ClusterQueue, KueueWorkload, LocalQueue, WorkloadPriorityClass
from watchtower.domain.model import (
    Condition,
    Controller,
    Event,
    Namespace,
    Node,
    ObjectRef,
    OwnerRef,
    Pod,
    PriorityClass,
    ResourceQuota,
)
from watchtower.domain.node_use import DEFAULT_SCHEDULER
from watchtower.domain.quota import DRA_QUOTA_SUFFIX, GPU_QUOTA_RESOURCE
from watchtower.domain.workloads import TEMPLATE_HASH_LABEL, WORKLOAD_LABELS
from watchtower.ports import DecodeError as DecodeError  # re-exported: callers catch it from here

from . import dra, groups, kueue, wire
from .quantities import GPU, ceil_int, parse_quantity, pod_sums, sums_key
from .wire import Qty, pod_types

_TS_CACHE: dict[str, float] = {}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_time(ts: str | None) -> float | None:
    """Return RFC 3339 time (metav1.Time or MicroTime) as epoch seconds; None when absent; ValueError if bad."""
    if not ts:
        return None
    t = _TS_CACHE.get(ts)
    if t is None:
        dt = datetime.fromisoformat(ts)  # takes the "Z" suffix since Python 3.11
        if dt.tzinfo is None:
            raise ValueError(f"time without zone: {ts[:40]!r}")
        t = (dt - _EPOCH).total_seconds()  # a third cheaper than dt.timestamp()
        if len(_TS_CACHE) > 200_000:
            _TS_CACHE.clear()
        _TS_CACHE[ts] = t
    return t


_NO_STRINGS: Mapping[str, str] = MappingProxyType({})
_M = TypeVar("_M", bound=wire.Meta)
_R = TypeVar("_R")
_NO_SPEC = wire.PodSpec()
_NO_STATUS = wire.PodStatus()
_SHARED_LIMIT = 500_000  # distinct values remembered before starting over: hostile churn stays bounded


# ---- a page of a LIST ---------------------------------------------------------------------------


class ListPage(Sequence[msgspec.Raw]):
    """One LIST response: its items as raw objects, split out of the body only when first read.

    `ObjectDecoder.pods` decodes a page of pods straight from `body` in one pass instead, and notes how
    many there were, so that counting them does not split the body either.
    """

    __slots__ = ("_decoder", "_items", "body", "size")

    def __init__(self, body: bytes, decoder: ObjectDecoder, items: list[msgspec.Raw] | None = None) -> None:
        self.body = body
        self._decoder = decoder
        self._items = items
        self.size: int | None = None if items is None else len(items)

    @property
    def unsplit(self) -> bool:
        return self._items is None

    def _split(self) -> list[msgspec.Raw]:
        """Return the raw items; raise DecodeError when the body cannot be read."""
        if self._items is None:
            self._items = self._decoder.decode_list(self.body)[0]
            self.size = len(self._items)
        return self._items

    def __len__(self) -> int:
        return self.size if self.size is not None else len(self._split())

    @overload
    def __getitem__(self, i: int) -> msgspec.Raw: ...
    @overload
    def __getitem__(self, i: slice) -> list[msgspec.Raw]: ...
    def __getitem__(self, i: int | slice) -> msgspec.Raw | list[msgspec.Raw]:
        return self._split()[i]

    def __iter__(self) -> Iterator[msgspec.Raw]:
        return iter(self._split())


# ---- the decoder ----------------------------------------------------------------------------------


@dataclass
class ObjectDecoder:
    """Decodes API objects into domain records, keeping only the labels the domain reads."""

    team_label: str = "team"
    keep_labels: frozenset[str] = field(default_factory=frozenset)
    keep_annotations: frozenset[str] = field(default_factory=frozenset)
    annotation_limit: int = 2048  # a display note, not a payload: longer values are cut
    # DRA device classes that are GPUs: their `<class>.deviceclass.resource.k8s.io/devices` quota is GPUs.
    gpu_device_classes: frozenset[str] = frozenset({GPU_DEVICE_CLASS})
    # Kueue resource names (deviceClassMappings) that are GPUs: a ClusterQueue's quota in them is GPUs.
    kueue_gpu_resources: frozenset[str] = frozenset()
    # The namespace annotation naming a team's fairness report recipients; "" reads none.
    report_annotation: str = ""

    def __post_init__(self) -> None:
        self._labels = frozenset(self.keep_labels) | WORKLOAD_LABELS
        self._label_keys = tuple(sorted(self._labels | {TEMPLATE_HASH_LABEL}))
        # pod-template-hash is read into the ReplicaSet owner, not the pod's labels (unless configured).
        self._hash_at = self._label_keys.index(TEMPLATE_HASH_LABEL)
        self._hash_kept = TEMPLATE_HASH_LABEL in self._labels
        # Volcano's group annotation is always read (into the pod's group), a display note only if asked.
        self._note_keys = tuple(sorted(set(self.keep_annotations) | {VOLCANO_GROUP_ANNOTATION}))
        self._group_at = self._note_keys.index(VOLCANO_GROUP_ANNOTATION)
        self._group_noted = VOLCANO_GROUP_ANNOTATION in self.keep_annotations
        self._no_notes: tuple[None, ...] = (None,) * len(self._note_keys)
        self._groups: dict[tuple[str, str, str], GroupRef] = {}
        pod_type, page_type = pod_types(self._label_keys, self._note_keys)
        self._dec_pod: msgspec.json.Decoder[wire.Pod] = msgspec.json.Decoder(pod_type)
        self._dec_node = msgspec.json.Decoder(wire.Node)
        self._dec_ns = msgspec.json.Decoder(wire.Namespace)
        self._dec_pc = msgspec.json.Decoder(wire.PriorityClass)
        self._dec_quota = msgspec.json.Decoder(wire.Quota)
        self._dec_event = msgspec.json.Decoder(wire.Event)
        self._dec_controller = msgspec.json.Decoder(wire.Controller)
        self._dec_paddle = msgspec.json.Decoder(wire.PaddleJob)
        self._dec_workload = msgspec.json.Decoder(wire.Workload)
        self._dec_pod_group = msgspec.json.Decoder(wire.PodGroup)
        self._dec_volcano_group = msgspec.json.Decoder(wire.VolcanoPodGroup)
        self._dec_volcano_queue = msgspec.json.Decoder(wire.VolcanoQueue)

        self._dec_jobset = msgspec.json.Decoder(wire.JobSet)
        self._dec_device_class = msgspec.json.Decoder(wire.DeviceClass)
        self._dec_claim = msgspec.json.Decoder(wire.ResourceClaim)
        self._dec_claim_template = msgspec.json.Decoder(wire.ResourceClaimTemplate)
        self._dec_slice = msgspec.json.Decoder(wire.ResourceSlice)
        self._dec_kueue_workload = msgspec.json.Decoder(kueue.Workload)
        self._dec_cluster_queue = msgspec.json.Decoder(kueue.ClusterQueueObj)
        self._dec_local_queue = msgspec.json.Decoder(kueue.LocalQueueObj)
        self._dec_kueue_class = msgspec.json.Decoder(kueue.PriorityClassObj)
        self._dec_pending = msgspec.json.Decoder(kueue.PendingWorkloads)
        self._dec_head = msgspec.json.Decoder(wire.Head)
        self._dec_list = msgspec.json.Decoder(wire.List)
        self._dec_pod_page: msgspec.json.Decoder[wire.PodPage] = msgspec.json.Decoder(page_type)
        self._dec_watch = msgspec.json.Decoder(wire.WatchEvent)
        # One object per distinct value (namespaces, node names, owners, messages, label sets): 150,000
        # pods repeat a few thousand of them, and a separate copy each would cost ~1 KB per pod.
        self._shared: dict[object, Any] = {}
        self._owners: dict[tuple[str, str, str, str, str], OwnerRef] = {}
        self._label_sets: dict[tuple[str | None, ...], Mapping[str, str]] = {}
        self._sums: dict[object, tuple[int, int, int]] = {}
        self._images: dict[str, tuple[str]] = {}  # image → (image,), the images of one-container pods

    # lists and watch lines

    def decode_list(self, data: bytes) -> tuple[list[msgspec.Raw], str, str]:
        """Return (items, resourceVersion, continue token) of a LIST response; raise DecodeError."""
        try:
            lst = self._dec_list.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise DecodeError(f"unreadable list: {e}") from e
        meta = lst.metadata or wire.ListMeta()
        return list(lst.items or ()), meta.resourceVersion or "", meta.cont or ""

    def list_page(self, data: bytes) -> tuple[ListPage, str, str]:
        """Return (page, resourceVersion, continue token) of a LIST response, reading only its head.

        The API server writes a list's metadata before its items, so the head is read alone and the
        items are left for one pass later (`pods`). A body whose head does not read that way is read
        whole at once; raise DecodeError when it is unreadable.
        """
        cut = data.find(b'"items"')
        meta = None
        if cut > 0:
            try:
                meta = self._dec_list.decode(data[:cut] + b'"items":null}').metadata
            except (msgspec.DecodeError, msgspec.ValidationError):
                meta = None
        if meta is None:
            items, rv, cont = self.decode_list(data)
            return ListPage(data, self, items), rv, cont
        return ListPage(data, self), meta.resourceVersion or "", meta.cont or ""

    def decode_watch_line(self, line: bytes) -> tuple[str, msgspec.Raw | None]:
        """Return (type, raw object) of one watch event line; raise DecodeError."""
        try:
            ev = self._dec_watch.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise DecodeError(f"unreadable watch event: {e}") from e
        obj = ev.object
        absent = not len(obj) or (len(obj) == 4 and bytes(obj) == b"null")
        return ev.type, None if absent else obj

    def head(self, raw: bytes | msgspec.Raw) -> tuple[str, str, str]:
        """Return (kind, resourceVersion, uid) of any object; raise DecodeError."""
        try:
            h = self._dec_head.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise DecodeError(f"unreadable object: {e}") from e
        m = h.metadata or wire.Meta()
        return h.kind or "", m.resourceVersion or "", m.uid or ""

    # kinds

    def _meta(self, meta: _M | None, kind: str, *, namespaced: bool = True) -> _M:
        if meta is None:
            raise DecodeError(f"{kind} without metadata", kind=kind)
        if not meta.name:
            raise DecodeError(f"{kind} without a name", kind=kind, uid=meta.uid or "")
        if namespaced and not meta.namespace:
            raise DecodeError(f"{kind} {meta.name!r} without a namespace", kind=kind, uid=meta.uid or "")
        return meta

    def pod(self, raw: bytes | msgspec.Raw) -> Pod:
        """Return the Pod record; raise DecodeError for an object the domain cannot use."""
        try:
            p = self._dec_pod.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise DecodeError(f"Pod: {e}", kind="Pod") from e
        return self._record(p)

    def pods(
        self, items: Iterable[bytes | msgspec.Raw], on_error: Callable[[DecodeError], None]
    ) -> Iterator[Pod]:
        """Yield the Pod record of each item; hand each unusable one to `on_error` and go on.

        A `ListPage` is decoded in one pass over its body (splitting it into items first would read the
        bytes twice); when that fails (a malformed pod, or the body itself), it is read item by item,
        which raises DecodeError if the body cannot be read at all.
        """
        if isinstance(items, ListPage) and items.unsplit:
            try:
                decoded = self._dec_pod_page.decode(items.body).items or []
            except (msgspec.DecodeError, msgspec.ValidationError):
                decoded = None
            if decoded is not None:
                items.size = len(decoded)
                for p in decoded:
                    try:
                        yield self._record(p)
                    except DecodeError as e:
                        on_error(e)
                return
        for raw in items:
            try:
                yield self.pod(raw)
            except DecodeError as e:
                on_error(e)

    def _record(self, p: wire.Pod) -> Pod:
        meta = p.metadata
        # _meta's checks inline (it raises): one call fewer per pod on the LIST path.
        if meta is None or not meta.name or not meta.namespace:
            self._meta(meta, "Pod")
        assert meta is not None
        uid, name = meta.uid or "", meta.name or ""
        if not uid:
            raise DecodeError(f"Pod {name!r} without a uid", kind="Pod", name=name)
        try:
            return self._pod(p, meta)
        except (ValueError, TypeError, OverflowError) as e:
            raise DecodeError(f"Pod {meta.namespace}/{name}: {e}", kind="Pod", uid=uid, name=name) from e

    def _pod(self, p: wire.Pod, meta: wire.PodMeta) -> Pod:
        # About 5 µs per pod here is the budget of a 150,000-pod LIST (DESIGN §8): no intermediate
        # objects, one dict lookup per repeated value, and the resource sums memoised.
        spec = p.spec or _NO_SPEC
        st = p.status or _NO_STATUS
        shared = self._shared
        if len(shared) > _SHARED_LIMIT:
            shared.clear()
            self._images.clear()
        share = shared.setdefault
        times = _TS_CACHE  # parse_time's memo, read inline: five look-ups per pod
        ts = meta.creationTimestamp
        created = (times.get(ts) or parse_time(ts)) if ts else None
        if created is None:
            raise ValueError("no creationTimestamp")
        kept: Mapping[str, str] = _NO_STRINGS
        template_hash = None
        if meta.labels is not None:
            values = astuple(meta.labels)
            at = self._hash_at
            template_hash = values[at]
            if template_hash is not None and not self._hash_kept:
                values = (*values[:at], None, *values[at + 1 :])
            known = self._label_sets.get(values)
            kept = known if known is not None else self._label_set(values)
        owner = None
        refs = meta.ownerReferences
        if refs:
            o = refs[0]
            if not o.controller:
                o = next((r for r in refs if r.controller), o)
            th = template_hash if template_hash is not None and o.kind == "ReplicaSet" else ""
            okey = (o.kind, o.name, o.apiVersion, o.uid, th)
            owner = self._owners.get(okey)
            if owner is None:
                if len(self._owners) > _SHARED_LIMIT:
                    self._owners.clear()
                owner = self._owners[okey] = OwnerRef(*okey)
        scheduled = disruption = None
        for c in st.conditions or ():
            if c.type == "PodScheduled":
                ts = c.lastTransitionTime
                # A bound pod's condition has no reason nor message: no look-up for those.
                r, m = c.reason, c.message
                scheduled = Condition(
                    share(c.status, c.status),
                    share(r, r) if r else "",
                    share(m, m) if m else "",
                    (times.get(ts) or parse_time(ts)) if ts else None,
                )
            elif c.type == "DisruptionTarget":
                disruption = Condition(
                    share(c.status, c.status),
                    share(c.reason or "", c.reason or ""),
                    share(c.message or "", c.message or ""),
                    parse_time(c.lastTransitionTime),
                )
        running_since = None
        for cs in st.containerStatuses or ():
            s = cs.state
            if s is None:
                continue
            started = s.running or s.terminated
            ts = started.startedAt if started is not None else None
            if ts:
                t = times.get(ts) or parse_time(ts)
                if t is not None and (running_since is None or t < running_since):
                    running_since = t
        ctrs = spec.containers
        if ctrs is not None and len(ctrs) == 1:
            image = ctrs[0].image
            images: tuple[str, ...] = self._images.setdefault(image, (image,)) if image else ()
        else:
            images = tuple([c.image for c in ctrs or () if c.image])
            images = share(images, images)
        notes: Mapping[str, str] = _NO_STRINGS
        volcano_group = None
        if meta.annotations is not None:
            found = astuple(meta.annotations)
            if found != self._no_notes:  # most pods carry none of the kept annotations
                at = self._group_at
                volcano_group = found[at]
                if volcano_group is not None and not self._group_noted:
                    found = (*found[:at], None, *found[at + 1 :])
                limit = self.annotation_limit
                notes = {k: v[:limit] for k, v in zip(self._note_keys, found, strict=True) if v is not None}
                notes = notes or _NO_STRINGS
        sums = self._sums_of(spec)
        namespace = meta.namespace or ""
        phase = st.phase or "Pending"
        priority = spec.priority or 0
        pclass = spec.priorityClassName or ""
        policy = spec.preemptionPolicy or "PreemptLowerPriority"
        node = spec.nodeName or ""
        # Usually absent: "" needs no look-up.
        nominated = st.nominatedNodeName
        nominated = share(nominated, nominated) if nominated else ""
        reason = st.reason
        reason = share(reason, reason) if reason else ""
        ts = st.startTime
        start_time = (times.get(ts) or parse_time(ts)) if ts else None
        scheduler = spec.schedulerName
        scheduler = share(scheduler, scheduler) if scheduler and scheduler != DEFAULT_SCHEDULER else ""
        group = None
        sg, wr = spec.schedulingGroup, spec.workloadRef
        if sg is not None and sg.podGroupName:
            group = self._group(REF_PODGROUP, sg.podGroupName, "")
        elif wr is not None and wr.name:
            group = self._group(REF_WORKLOAD, wr.name, wr.podGroup or "")
        elif volcano_group:
            group = self._group(REF_VOLCANO, volcano_group, "")
        rc = spec.resourceClaims
        claims = dra.pod_claims(rc, st.resourceClaimStatuses) if rc else ()
        # Positional, in Pod's field order: keywords cost more than the rest of building the record.
        return Pod(
            meta.uid or "",
            share(namespace, namespace),
            meta.name or "",
            created,
            share(phase, phase),
            share(priority, priority),
            share(pclass, pclass),
            share(policy, policy),
            sums[0],
            sums[1],
            sums[2],
            share(node, node),
            nominated,
            owner,
            kept,
            notes,
            images,
            bool(spec.schedulingGates),
            scheduled,
            disruption,
            start_time,
            running_since,
            parse_time(meta.deletionTimestamp) if meta.deletionTimestamp else None,
            reason,
            scheduler,
            group,
            claims,
        )

    def _group(self, source: str, name: str, part: str) -> GroupRef:
        """Return the one shared reference to a pod group: a gang's pods all name it."""
        key = (source, name, part)
        ref = self._groups.get(key)
        if ref is None:
            if len(self._groups) > _SHARED_LIMIT:
                self._groups.clear()
            ref = self._groups[key] = GroupRef(source, name, part)
        return ref

    def _label_set(self, values: tuple[str | None, ...]) -> Mapping[str, str]:
        """Return the one shared read-only mapping of the kept labels with these values (None: absent)."""
        got = self._label_sets.get(values)
        if got is None:
            if len(self._label_sets) > _SHARED_LIMIT:
                self._label_sets.clear()
            kept = {k: v for k, v in zip(self._label_keys, values, strict=True) if v is not None}
            got = self._label_sets[values] = MappingProxyType(kept) if kept else _NO_STRINGS
        return got

    def node(self, raw: bytes | msgspec.Raw) -> Node:
        def read() -> Node:
            n = self._dec_node.decode(raw)
            meta = self._meta(n.metadata, "Node", namespaced=False)
            alloc = (n.status.allocatable or n.status.capacity or {}) if n.status else {}
            spec = n.spec or wire.NodeSpec()
            return Node(
                name=meta.name or "",
                gpus=ceil_int(parse_quantity(alloc.get(GPU))),
                cpu_millis=ceil_int(parse_quantity(alloc.get("cpu")) * 1000),
                memory_bytes=ceil_int(parse_quantity(alloc.get("memory"))),
                pods=ceil_int(parse_quantity(alloc.get("pods"))),
                unschedulable=bool(spec.unschedulable),
                taints=tuple(f"{t.key}={t.value or ''}:{t.effect}" for t in spec.taints or ()),
            )

        return _reading("Node", read)

    def namespace(self, raw: bytes | msgspec.Raw) -> Namespace:
        def read() -> Namespace:
            n = self._dec_ns.decode(raw)
            meta = self._meta(n.metadata, "Namespace", namespaced=False)
            notes = meta.annotations or {}
            report_to = notes.get(self.report_annotation, "") if self.report_annotation else ""
            return Namespace(
                meta.name or "",
                (meta.labels or {}).get(self.team_label, ""),
                report_to[: self.annotation_limit],
            )

        return _reading("Namespace", read)

    def priority_class(self, raw: bytes | msgspec.Raw) -> PriorityClass:
        def read() -> PriorityClass:
            pc = self._dec_pc.decode(raw)
            meta = self._meta(pc.metadata, "PriorityClass", namespaced=False)
            if pc.value is None:
                raise DecodeError(f"PriorityClass {meta.name!r} without a value", kind="PriorityClass")
            return PriorityClass(
                meta.name or "",
                pc.value,
                pc.preemptionPolicy or "PreemptLowerPriority",
                bool(pc.globalDefault),
            )

        return _reading("PriorityClass", read)

    def quota(self, raw: bytes | msgspec.Raw) -> ResourceQuota:
        try:
            q = self._dec_quota.decode(raw)
            meta = self._meta(q.metadata, "ResourceQuota")
            st = q.status or wire.QuotaStatus()
            hard = st.hard if st.hard is not None else (q.spec.hard if q.spec else None)

            keys = (GPU_QUOTA_RESOURCE, *(c + DRA_QUOTA_SUFFIX for c in sorted(self.gpu_device_classes)))

            def gpu(d: dict[str, Qty] | None) -> int | None:
                # nvidia.com/gpu requests and DRA devices of GPU classes are both GPUs (DESIGN §3.16).
                found = [ceil_int(parse_quantity(d[k])) for k in keys if k in d] if d else []
                return sum(found) if found else None

            return ResourceQuota(meta.namespace or "", meta.name or "", gpu(hard), gpu(st.used))
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError) as e:
            raise _wrap(e, "ResourceQuota") from e

    # controllers: only what their pods would be (DESIGN §3.15), for work a ResourceQuota refuses

    def job(self, raw: bytes | msgspec.Raw) -> Controller:
        """Return a batch/v1 Job as the pods it wants now: parallelism, capped by the completions left."""

        def read() -> Controller:
            j = self._dec_controller.decode(raw)
            spec = j.spec or wire.ControllerSpec()
            wanted = spec.parallelism if spec.parallelism is not None else 1
            if spec.completions is not None:
                done = j.status.succeeded if j.status is not None else None
                wanted = min(wanted, spec.completions - (done or 0))
            if spec.suspend:
                wanted = 0  # Kueue holds it: no pod is even tried
            return self._controller("Job", j.metadata, [(wanted, spec.template)])

        return _reading("Job", read)

    def replica_set(self, raw: bytes | msgspec.Raw) -> Controller:
        """Return an apps/v1 ReplicaSet as the pods it wants; its owner names its Deployment."""

        def read() -> Controller:
            rs = self._dec_controller.decode(raw)
            spec = rs.spec or wire.ControllerSpec()
            wanted = spec.replicas if spec.replicas is not None else 1
            return self._controller("ReplicaSet", rs.metadata, [(wanted, spec.template)])

        return _reading("ReplicaSet", read)

    def paddle_job(self, raw: bytes | msgspec.Raw) -> Controller:
        """Return a PaddleJob as the pods of its roles (ps, worker, heter) together, with its own status:
        phase, the pods its roles count, and its schedulingPolicy (whose class outranks the template's)."""
        try:
            pj = self._dec_paddle.decode(raw)
            spec = pj.spec or wire.PaddleJobSpec()
            roles = [
                (r.replicas or 0, r.template) for r in (spec.ps, spec.worker, spec.heter) if r is not None
            ]
            c = self._controller("PaddleJob", pj.metadata, roles)
            st = pj.status or wire.PaddleJobStatus()
            reported = 0
            for rs in (st.ps, st.worker, st.heter):
                if rs is not None:
                    counts = (rs.pending, rs.starting, rs.running, rs.failed, rs.succeeded, rs.unknown)
                    if any(n is not None and n < 0 for n in counts):
                        raise DecodeError(f"PaddleJob {c.name!r}: a negative pod count", kind="PaddleJob")
                    reported += sum(n or 0 for n in counts)
            policy = spec.schedulingPolicy
            pclass = (policy.priorityClass if policy is not None else None) or c.priority_class
            meta = pj.metadata
            return msgspec.structs.replace(
                c,
                priority_class=pclass,
                created=parse_time(meta.creationTimestamp) if meta is not None else None,
                phase=st.phase or "",
                pods_reported=reported,
                min_available=policy.minAvailable if policy is not None else None,
                queue=(policy.queue if policy is not None else None) or "",
            )
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError) as e:
            raise _wrap(e, "PaddleJob") from e

    # pod groups and queues (groups.py reads them)

    def gang_workload(self, raw: bytes | msgspec.Raw) -> GangWorkload:
        """Return an upstream Workload, v1alpha1 (1.35) or v1alpha2 (1.36)."""
        return _reading("Workload", lambda: groups.workload(self._dec_workload.decode(raw)))

    def pod_group(self, raw: bytes | msgspec.Raw) -> Gang:
        """Return an upstream scheduling.k8s.io PodGroup."""
        return _reading("PodGroup", lambda: groups.pod_group(self._dec_pod_group.decode(raw), parse_time))

    def volcano_pod_group(self, raw: bytes | msgspec.Raw) -> Gang:
        """Return a Volcano scheduling.volcano.sh PodGroup."""
        return _reading(
            "VolcanoPodGroup",
            lambda: groups.volcano_pod_group(self._dec_volcano_group.decode(raw), parse_time),
        )

    def volcano_queue(self, raw: bytes | msgspec.Raw) -> VolcanoQueue:
        """Return a Volcano Queue."""
        return _reading("VolcanoQueue", lambda: groups.volcano_queue(self._dec_volcano_queue.decode(raw)))

    # Dynamic Resource Allocation (dra.py reads them)

    def device_class(self, raw: bytes | msgspec.Raw) -> DeviceClass:
        return _reading("DeviceClass", lambda: dra.device_class(self._dec_device_class.decode(raw)))

    def resource_claim(self, raw: bytes | msgspec.Raw) -> ResourceClaim:
        return _reading("ResourceClaim", lambda: dra.resource_claim(self._dec_claim.decode(raw)))

    def claim_template(self, raw: bytes | msgspec.Raw) -> ResourceClaim:
        return _reading(
            "ResourceClaimTemplate", lambda: dra.claim_template(self._dec_claim_template.decode(raw))
        )

    def resource_slice(self, raw: bytes | msgspec.Raw) -> ResourceSlice:
        return _reading("ResourceSlice", lambda: dra.resource_slice(self._dec_slice.decode(raw)))

    # Kueue (kueue.py reads them)

    def kueue_workload(self, raw: bytes | msgspec.Raw) -> KueueWorkload:
        """Return a Kueue Workload, v1beta2 or v1beta1."""
        return _reading(
            "KueueWorkload",
            lambda: kueue.workload(
                self._dec_kueue_workload.decode(raw), parse_time, self._sums_of, self._share_str
            ),
        )

    def _share_str(self, s: str) -> str:
        shared = self._shared
        if len(shared) > _SHARED_LIMIT:
            shared.clear()
        out: str = shared.setdefault(s, s)
        return out

    def cluster_queue(self, raw: bytes | msgspec.Raw) -> ClusterQueue:
        return _reading(
            "ClusterQueue",
            lambda: kueue.cluster_queue(self._dec_cluster_queue.decode(raw), self.kueue_gpu_resources),
        )

    def local_queue(self, raw: bytes | msgspec.Raw) -> LocalQueue:
        return _reading("LocalQueue", lambda: kueue.local_queue(self._dec_local_queue.decode(raw)))

    def workload_priority_class(self, raw: bytes | msgspec.Raw) -> WorkloadPriorityClass:
        return _reading(
            "WorkloadPriorityClass", lambda: kueue.priority_class(self._dec_kueue_class.decode(raw))
        )

    def pending_positions(self, data: bytes) -> dict[tuple[str, str], int]:
        """Return the positions in a visibility API pendingworkloads body; raise DecodeError."""
        return _reading("PendingWorkloads", lambda: kueue.pending_positions(self._dec_pending.decode(data)))

    def type_of(self, raw: bytes | msgspec.Raw) -> tuple[str, str]:
        """Return an object's (kind, apiVersion); raise DecodeError."""
        try:
            h = self._dec_head.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise DecodeError(f"unreadable object: {e}") from e
        return h.kind or "", h.apiVersion or ""

    def jobset(self, raw: bytes | msgspec.Raw) -> Controller:
        """Return a JobSet as the pods of all its child Jobs together; its owner names a TrainJob."""

        def read() -> Controller:
            js = self._dec_jobset.decode(raw)
            spec = js.spec or wire.JobSetSpec()
            roles: list[tuple[int, wire.Template | None]] = []
            for rj in spec.replicatedJobs or ():
                job = (rj.template.spec if rj.template is not None else None) or wire.ControllerSpec()
                per_job = job.parallelism if job.parallelism is not None else 1
                if job.completions is not None:
                    per_job = min(per_job, job.completions)
                jobs = rj.replicas if rj.replicas is not None else 1
                roles.append((0 if spec.suspend else jobs * per_job, job.template))
            return self._controller("JobSet", js.metadata, roles)

        return _reading("JobSet", read)

    def _sums_of(self, spec: wire.PodSpec) -> tuple[int, int, int]:
        """Return a pod spec's (GPUs, CPU millis, memory bytes), memoised on its resources' JSON text:
        specs repeat across a controller's pods, its templates and every MODIFIED of either."""
        ctrs = spec.containers
        if ctrs is not None and len(ctrs) == 1 and not spec.initContainers and not len(spec.overhead):
            skey: object = bytes(ctrs[0].resources)  # the usual pod: one container
        else:
            skey = sums_key(spec)
        sums = self._sums.get(skey)
        if sums is None:
            sums = pod_sums(spec)
            if len(self._sums) > 10_000:
                self._sums.clear()
            self._sums[skey] = sums
        return sums

    def _controller(
        self, kind: str, meta: wire.ControllerMeta | None, roles: list[tuple[int, wire.Template | None]]
    ) -> Controller:
        """Return the record of a controller whose pods are `roles`: (how many, from which template).

        The class is the one of the role asking the most GPUs per pod (a PaddleJob's workers, not its
        CPU-only parameter servers)."""
        if meta is None or not meta.name or not meta.namespace:
            what = "metadata" if meta is None else "a namespace" if meta.name else "a name"
            raise DecodeError(f"{kind} without {what}", kind=kind, uid=(meta.uid or "") if meta else "")
        m = meta
        owner = None
        for o in m.ownerReferences or ():
            if o.controller:
                owner = OwnerRef(o.kind, o.name, o.apiVersion, o.uid)
        share = self._shared.setdefault
        pods = gpus = per_pod = 0
        pclass, priority, top = "", None, -1
        for count, template in roles:
            tspec = (template.spec if template is not None else None) or _NO_SPEC
            g = self._sums_of(tspec)[0]
            count = max(0, count)
            pods += count
            gpus += count * g
            per_pod = max(per_pod, g)
            if g > top:
                top, pclass, priority = g, tspec.priorityClassName or "", tspec.priority
        ns = m.namespace or ""
        return Controller(
            share(ns, ns),
            kind,
            m.name or "",
            m.uid or "",
            owner,
            share(pclass, pclass),
            priority,
            per_pod,
            gpus,
            pods,
        )

    def event(self, raw: bytes | msgspec.Raw) -> Event:
        try:
            e = self._dec_event.decode(raw)
            meta = self._meta(e.metadata, "Event")
            reg = e.regarding or e.involvedObject or wire.Ref()
            series = e.series
            first = parse_time(e.eventTime) or parse_time(e.firstTimestamp or e.deprecatedFirstTimestamp)
            last = (
                parse_time(series.lastObservedTime if series else None)
                or parse_time(e.lastTimestamp or e.deprecatedLastTimestamp)
                or first
            )
            count = (series.count if series and series.count else None) or e.count or e.deprecatedCount or 1
            rel = e.related
            return Event(
                uid=meta.uid or f"{meta.namespace}/{meta.name}",
                namespace=meta.namespace or "",
                reason=e.reason or "",
                message=e.message if e.message is not None else (e.note or ""),
                regarding=ObjectRef(
                    reg.kind or "", reg.namespace or "", reg.name or "", reg.uid or "", reg.apiVersion or ""
                ),
                related=ObjectRef(
                    rel.kind or "", rel.namespace or "", rel.name or "", rel.uid or "", rel.apiVersion or ""
                )
                if rel
                else None,
                first=first,
                last=last,
                count=count,
                source=e.reportingController
                or e.reportingComponent
                or (e.source.component if e.source else "")
                or "",
                type=e.type or "Normal",
            )
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError) as e:
            raise _wrap(e, "Event") from e


def _wrap(e: Exception, kind: str) -> DecodeError:
    if isinstance(e, DecodeError):
        return e
    return DecodeError(f"{kind}: {e}", kind=kind)


def _reading(kind: str, read: Callable[[], _R]) -> _R:
    """Return what `read` makes of an object; its msgspec and value errors become a DecodeError naming
    the kind. For the rarer kinds: the pod path keeps its own try, a call frame cheaper per pod."""
    try:
        return read()
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError) as e:
        raise _wrap(e, kind) from e
