"""Kubernetes JSON → domain records, by typed partial decoding.

msgspec Structs declare only the fields Watchtower reads, so the rest of each object is skipped without
building Python objects for it. Each list item is decoded on its own: one malformed object is reported
and skipped, never the whole page.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, DecimalException
from types import MappingProxyType
from typing import Any

import msgspec

from watchtower.domain.model import (
    Condition,
    Event,
    Namespace,
    Node,
    ObjectRef,
    OwnerRef,
    Pod,
    PriorityClass,
    ResourceQuota,
)
from watchtower.domain.quota import GPU_QUOTA_RESOURCE
from watchtower.domain.workloads import WORKLOAD_LABELS

GPU = "nvidia.com/gpu"
Qty = str | int | float


class DecodeError(ValueError):
    """An object that cannot be read; `uid` names it when that much could be read."""

    def __init__(self, message: str, *, kind: str = "", uid: str = "", name: str = "") -> None:
        super().__init__(message)
        self.kind, self.uid, self.name = kind, uid, name


# ---- wire structs: only what is read -------------------------------------------------------------


class _Owner(msgspec.Struct):
    kind: str = ""
    name: str = ""
    apiVersion: str = ""
    uid: str = ""
    controller: bool | None = None


class _Meta(msgspec.Struct):
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    resourceVersion: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    ownerReferences: list[_Owner] | None = None


class _Resources(msgspec.Struct):
    requests: dict[str, Qty] | None = None
    limits: dict[str, Qty] | None = None


class _Container(msgspec.Struct):
    image: str | None = None
    resources: _Resources | None = None


class _PodSpec(msgspec.Struct):
    nodeName: str | None = None
    priority: int | None = None
    priorityClassName: str | None = None
    preemptionPolicy: str | None = None
    schedulingGates: list[msgspec.Raw] | None = None
    containers: list[_Container] | None = None
    initContainers: list[_Container] | None = None
    overhead: dict[str, Qty] | None = None


class _Cond(msgspec.Struct):
    type: str = ""
    status: str = ""
    reason: str | None = None
    message: str | None = None
    lastTransitionTime: str | None = None


class _StartedAt(msgspec.Struct):
    startedAt: str | None = None


class _CState(msgspec.Struct):
    running: _StartedAt | None = None
    terminated: _StartedAt | None = None


class _CStatus(msgspec.Struct):
    state: _CState | None = None


class _PodStatus(msgspec.Struct):
    phase: str | None = None
    reason: str | None = None
    startTime: str | None = None
    nominatedNodeName: str | None = None
    conditions: list[_Cond] | None = None
    containerStatuses: list[_CStatus] | None = None


class _Pod(msgspec.Struct):
    metadata: _Meta | None = None
    spec: _PodSpec | None = None
    status: _PodStatus | None = None


class _Taint(msgspec.Struct):
    key: str = ""
    value: str | None = None
    effect: str = ""


class _NodeSpec(msgspec.Struct):
    unschedulable: bool | None = None
    taints: list[_Taint] | None = None


class _NodeStatus(msgspec.Struct):
    allocatable: dict[str, Qty] | None = None
    capacity: dict[str, Qty] | None = None


class _Node(msgspec.Struct):
    metadata: _Meta | None = None
    spec: _NodeSpec | None = None
    status: _NodeStatus | None = None


class _Namespace(msgspec.Struct):
    metadata: _Meta | None = None


class _PriorityClass(msgspec.Struct):
    metadata: _Meta | None = None
    value: int | None = None
    preemptionPolicy: str | None = None
    globalDefault: bool | None = None


class _QuotaStatus(msgspec.Struct):
    hard: dict[str, Qty] | None = None
    used: dict[str, Qty] | None = None


class _QuotaSpec(msgspec.Struct):
    hard: dict[str, Qty] | None = None


class _Quota(msgspec.Struct):
    metadata: _Meta | None = None
    spec: _QuotaSpec | None = None
    status: _QuotaStatus | None = None


class _Ref(msgspec.Struct):
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None


class _Series(msgspec.Struct):
    count: int | None = None
    lastObservedTime: str | None = None


class _Source(msgspec.Struct):
    component: str | None = None


class _Event(msgspec.Struct):
    """core/v1 Event and events.k8s.io/v1 Event in one: each fills its own names."""

    metadata: _Meta | None = None
    reason: str | None = None
    message: str | None = None
    note: str | None = None
    type: str | None = None
    involvedObject: _Ref | None = None
    regarding: _Ref | None = None
    related: _Ref | None = None
    firstTimestamp: str | None = None
    lastTimestamp: str | None = None
    deprecatedFirstTimestamp: str | None = None
    deprecatedLastTimestamp: str | None = None
    eventTime: str | None = None
    count: int | None = None
    deprecatedCount: int | None = None
    series: _Series | None = None
    source: _Source | None = None
    reportingComponent: str | None = None
    reportingController: str | None = None


class _Head(msgspec.Struct):
    kind: str | None = None
    apiVersion: str | None = None
    metadata: _Meta | None = None


class _ListMeta(msgspec.Struct):
    resourceVersion: str | None = None
    # `continue` is a Python keyword: renamed on the wire.
    cont: str | None = msgspec.field(default=None, name="continue")


class _List(msgspec.Struct):
    kind: str | None = None
    apiVersion: str | None = None
    metadata: _ListMeta | None = None
    items: list[msgspec.Raw] | None = None


class _WatchEvent(msgspec.Struct):
    type: str = ""
    # msgspec cannot decode `Raw | None`; an absent or null object becomes None in decode_watch_line.
    object: msgspec.Raw = msgspec.Raw(b"")


# ---- values -------------------------------------------------------------------------------------

_SUFFIX = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
# Kubernetes quantities are at most ~9.2e18 (int64 milli-units); far beyond that is garbage.
_QTY_EXP_LIMIT = 30
_QTY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")


def parse_quantity(q: Qty | None) -> Decimal:
    """Return a Kubernetes resource quantity ("500m", "16Gi", "2", 2) as a Decimal; raise ValueError."""
    if q is None:
        return Decimal(0)
    if isinstance(q, bool):
        raise ValueError(f"not a quantity: {q!r}")
    if isinstance(q, int | float):
        if isinstance(q, float) and not math.isfinite(q):
            raise ValueError(f"not a quantity: {q!r}")
        return _bounded(Decimal(str(q)), q)
    m = _QTY.match(q.strip())
    if m is None:
        raise ValueError(f"not a quantity: {q[:40]!r}")
    try:
        return _bounded(Decimal(m.group(1)), q) * _SUFFIX[m.group(2)]
    except DecimalException as e:  # InvalidOperation for "1.2.3"; Overflow is not a ValueError
        raise ValueError(f"not a quantity: {q[:40]!r}") from e


def _bounded(d: Decimal, q: Qty) -> Decimal:
    # "1e999999" is a valid Decimal, but turning it into an int takes seconds of CPU: hostile input.
    if d and not -_QTY_EXP_LIMIT <= d.adjusted() <= _QTY_EXP_LIMIT:
        raise ValueError(f"quantity out of range: {str(q)[:40]!r}")
    return d


def _ceil_int(d: Decimal) -> int:
    return int(d.to_integral_value(rounding="ROUND_CEILING"))


_TS_CACHE: dict[str, float] = {}


def parse_time(ts: str | None) -> float | None:
    """Return RFC 3339 time (metav1.Time or MicroTime) as epoch seconds; None when absent; ValueError if bad."""
    if not ts:
        return None
    t = _TS_CACHE.get(ts)
    if t is None:
        dt = datetime.fromisoformat(ts.replace("Z", "+00:00") if ts.endswith("Z") else ts)
        if dt.tzinfo is None:
            raise ValueError(f"time without zone: {ts[:40]!r}")
        t = dt.timestamp()
        if len(_TS_CACHE) > 100_000:
            _TS_CACHE.clear()
        _TS_CACHE[ts] = t
    return t


def _request(c: _Container, resource: str) -> Decimal:
    r = c.resources
    if r is None:
        return Decimal(0)
    if r.requests and resource in r.requests:
        return parse_quantity(r.requests[resource])
    # Extended resources (and any resource with only a limit) default their request to the limit.
    if r.limits and resource in r.limits:
        return parse_quantity(r.limits[resource])
    return Decimal(0)


def _effective(spec: _PodSpec, resource: str) -> Decimal:
    """The scheduler's effective request: max(sum of containers, largest init container) + overhead."""
    total = sum((_request(c, resource) for c in spec.containers or ()), Decimal(0))
    init = max((_request(c, resource) for c in spec.initContainers or ()), default=Decimal(0))
    over = parse_quantity((spec.overhead or {}).get(resource))
    return max(total, init) + over


_ResKey = tuple[Any, ...]
_RES_CACHE: dict[_ResKey, tuple[int, int, int]] = {}


def _res_key(cs: list[_Container] | None) -> _ResKey:
    if not cs:
        return ()
    out: list[object] = []
    for c in cs:
        r = c.resources
        if r is None:
            out.append(None)
        else:
            out.append(
                (tuple(r.requests.items()) if r.requests else (), tuple(r.limits.items()) if r.limits else ())
            )
    return tuple(out)


def _resources(spec: _PodSpec) -> tuple[int, int, int]:
    """Return (GPUs, CPU millis, memory bytes) the scheduler counts for the pod.

    Memoised on the containers' requests and limits: the pods of a job repeat them, and parsing
    quantities was most of the cost of decoding a pod.
    """
    key = (
        _res_key(spec.containers),
        _res_key(spec.initContainers),
        tuple(spec.overhead.items()) if spec.overhead else (),
    )
    got = _RES_CACHE.get(key)
    if got is None:
        got = (
            _ceil_int(_effective(spec, GPU)),
            _ceil_int(_effective(spec, "cpu") * 1000),
            _ceil_int(_effective(spec, "memory")),
        )
        if len(_RES_CACHE) > 10_000:
            _RES_CACHE.clear()
        _RES_CACHE[key] = got
    return got


_NO_STRINGS: Mapping[str, str] = MappingProxyType({})


# ---- the decoder ----------------------------------------------------------------------------------


@dataclass
class ObjectDecoder:
    """Decodes API objects into domain records, keeping only the labels the domain reads."""

    team_label: str = "team"
    keep_labels: frozenset[str] = field(default_factory=frozenset)
    keep_annotations: frozenset[str] = field(default_factory=frozenset)
    annotation_limit: int = 2048  # a display note, not a payload: longer values are cut

    def __post_init__(self) -> None:
        self._labels = frozenset(self.keep_labels) | WORKLOAD_LABELS
        self._dec_pod = msgspec.json.Decoder(_Pod)
        self._dec_node = msgspec.json.Decoder(_Node)
        self._dec_ns = msgspec.json.Decoder(_Namespace)
        self._dec_pc = msgspec.json.Decoder(_PriorityClass)
        self._dec_quota = msgspec.json.Decoder(_Quota)
        self._dec_event = msgspec.json.Decoder(_Event)
        self._dec_head = msgspec.json.Decoder(_Head)
        self._dec_list = msgspec.json.Decoder(_List)
        self._dec_watch = msgspec.json.Decoder(_WatchEvent)
        self._enc = msgspec.json.Encoder()
        # One object per distinct value (namespaces, node names, owners, messages, label sets): 150,000
        # pods repeat a few thousand of them, and a separate copy each would cost ~1 KB per pod.
        self._shared: dict[object, Any] = {}

    # lists and watch lines

    def decode_list(self, data: bytes) -> tuple[list[msgspec.Raw], str, str]:
        """Return (items, resourceVersion, continue token) of a LIST response; raise DecodeError."""
        try:
            lst = self._dec_list.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise DecodeError(f"unreadable list: {e}") from e
        meta = lst.metadata or _ListMeta()
        return list(lst.items or ()), meta.resourceVersion or "", meta.cont or ""

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
        m = h.metadata or _Meta()
        return h.kind or "", m.resourceVersion or "", m.uid or ""

    def compact_pod(self, raw: msgspec.Raw) -> msgspec.Raw:
        """Return the pod's JSON cut down to what `pod()` reads, kept labels and annotations only.

        A listed pod is held until the whole LIST has arrived; its full JSON (managedFields, env, volumes)
        is ~4 KB, the part read is a few hundred bytes. An unreadable pod is returned as it is, so the
        Ingestor reports it.
        """
        try:
            p = self._dec_pod.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return raw
        m = p.metadata
        if m is not None:
            if m.labels:
                m.labels = {k: v for k, v in m.labels.items() if k in self._labels}
            if m.annotations:
                m.annotations = {k: v for k, v in m.annotations.items() if k in self.keep_annotations}
        return msgspec.Raw(self._enc.encode(p))

    # kinds

    def _meta(self, meta: _Meta | None, kind: str, *, namespaced: bool = True) -> _Meta:
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
        meta = self._meta(p.metadata, "Pod")
        uid, name = meta.uid or "", meta.name or ""
        if not uid:
            raise DecodeError(f"Pod {name!r} without a uid", kind="Pod", name=name)
        try:
            return self._pod(p, meta)
        except (ValueError, TypeError, OverflowError) as e:
            raise DecodeError(f"Pod {meta.namespace}/{name}: {e}", kind="Pod", uid=uid, name=name) from e

    def _share(self, v: Any) -> Any:
        got = self._shared.get(v)
        if got is None:
            if len(self._shared) > 500_000:
                self._shared.clear()
            self._shared[v] = got = v
        return got

    def _pod(self, p: _Pod, meta: _Meta) -> Pod:
        spec = p.spec or _PodSpec()
        st = p.status or _PodStatus()
        created = parse_time(meta.creationTimestamp)
        if created is None:
            raise ValueError("no creationTimestamp")
        owner = None
        refs = meta.ownerReferences or []
        ctrl = [r for r in refs if r.controller] or refs[:1]
        share = self._share
        if ctrl:
            o = ctrl[0]
            okey = ("owner", o.kind, o.name, o.apiVersion, o.uid)
            owner = self._shared.get(okey)
            if owner is None:
                owner = self._shared[okey] = OwnerRef(o.kind, o.name, o.apiVersion, o.uid)
        labels = meta.labels
        kept: Mapping[str, str] = _NO_STRINGS
        if labels:
            items = tuple((k, v) for k, v in labels.items() if k in self._labels)
            if items:
                kept = self._label_set(items)
        scheduled = disruption = None
        for c in st.conditions or ():
            if c.type == "PodScheduled":
                scheduled = Condition(
                    c.status, c.reason or "", share(c.message or ""), parse_time(c.lastTransitionTime)
                )
            elif c.type == "DisruptionTarget":
                disruption = Condition(
                    c.status, c.reason or "", share(c.message or ""), parse_time(c.lastTransitionTime)
                )
        running_since = None
        for cs in st.containerStatuses or ():
            s = cs.state
            if s is None:
                continue
            started = (s.running or s.terminated or _StartedAt()).startedAt
            t = parse_time(started)
            if t is not None and (running_since is None or t < running_since):
                running_since = t
        images = share(tuple(c.image for c in spec.containers or () if c.image))
        notes: Mapping[str, str] = _NO_STRINGS
        if self.keep_annotations and meta.annotations:
            cut: dict[str, str] = {}
            for k in self.keep_annotations:
                v = meta.annotations.get(k)
                if v is not None:
                    cut[k] = v[: self.annotation_limit]
            if cut:
                notes = cut
        gpus, cpu_millis, memory_bytes = _resources(spec)
        return Pod(
            uid=meta.uid or "",
            namespace=share(meta.namespace or ""),
            name=meta.name or "",
            created=created,
            phase=share(st.phase or "Pending"),
            priority=spec.priority or 0,
            priority_class=share(spec.priorityClassName or ""),
            preemption_policy=share(spec.preemptionPolicy or "PreemptLowerPriority"),
            gpus=gpus,
            cpu_millis=cpu_millis,
            memory_bytes=memory_bytes,
            node=share(spec.nodeName or ""),
            nominated_node=share(st.nominatedNodeName or ""),
            owner=owner,
            labels=kept,
            annotations=notes,
            images=images,
            scheduling_gated=bool(spec.schedulingGates),
            scheduled=scheduled,
            disruption=disruption,
            start_time=parse_time(st.startTime),
            running_since=running_since,
            deleted_at=parse_time(meta.deletionTimestamp),
            status_reason=share(st.reason or ""),
        )

    def _label_set(self, items: tuple[tuple[str, str], ...]) -> Mapping[str, str]:
        """Return the one shared read-only mapping for this set of kept labels."""
        key = ("labels", items)
        got = self._shared.get(key)
        if got is None:
            got = self._shared[key] = MappingProxyType(dict(items))
        return got

    def node(self, raw: bytes | msgspec.Raw) -> Node:
        try:
            n = self._dec_node.decode(raw)
            meta = self._meta(n.metadata, "Node", namespaced=False)
            alloc = (n.status.allocatable or n.status.capacity or {}) if n.status else {}
            spec = n.spec or _NodeSpec()
            return Node(
                name=meta.name or "",
                gpus=_ceil_int(parse_quantity(alloc.get(GPU))),
                cpu_millis=_ceil_int(parse_quantity(alloc.get("cpu")) * 1000),
                memory_bytes=_ceil_int(parse_quantity(alloc.get("memory"))),
                pods=_ceil_int(parse_quantity(alloc.get("pods"))),
                unschedulable=bool(spec.unschedulable),
                taints=tuple(f"{t.key}={t.value or ''}:{t.effect}" for t in spec.taints or ()),
            )
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError) as e:
            raise _wrap(e, "Node") from e

    def namespace(self, raw: bytes | msgspec.Raw) -> Namespace:
        try:
            n = self._dec_ns.decode(raw)
            meta = self._meta(n.metadata, "Namespace", namespaced=False)
            return Namespace(meta.name or "", (meta.labels or {}).get(self.team_label, ""))
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError) as e:
            raise _wrap(e, "Namespace") from e

    def priority_class(self, raw: bytes | msgspec.Raw) -> PriorityClass:
        try:
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
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError) as e:
            raise _wrap(e, "PriorityClass") from e

    def quota(self, raw: bytes | msgspec.Raw) -> ResourceQuota:
        try:
            q = self._dec_quota.decode(raw)
            meta = self._meta(q.metadata, "ResourceQuota")
            st = q.status or _QuotaStatus()
            hard = st.hard if st.hard is not None else (q.spec.hard if q.spec else None)

            def gpu(d: dict[str, Qty] | None) -> int | None:
                if not d or GPU_QUOTA_RESOURCE not in d:
                    return None
                return _ceil_int(parse_quantity(d[GPU_QUOTA_RESOURCE]))

            return ResourceQuota(meta.namespace or "", meta.name or "", gpu(hard), gpu(st.used))
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError) as e:
            raise _wrap(e, "ResourceQuota") from e

    def event(self, raw: bytes | msgspec.Raw) -> Event:
        try:
            e = self._dec_event.decode(raw)
            meta = self._meta(e.metadata, "Event")
            reg = e.regarding or e.involvedObject or _Ref()
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
                regarding=ObjectRef(reg.kind or "", reg.namespace or "", reg.name or "", reg.uid or ""),
                related=ObjectRef(rel.kind or "", rel.namespace or "", rel.name or "", rel.uid or "")
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


def iter_kinds(decoder: ObjectDecoder, items: Iterable[msgspec.Raw]) -> Iterable[tuple[str, msgspec.Raw]]:
    """Yield (kind, raw) for the items of a mixed `kubectl get ... -o json` List."""
    for raw in items:
        try:
            kind, _, _ = decoder.head(raw)
        except DecodeError:
            yield "", raw
            continue
        yield kind, raw


def to_builtins(raw: msgspec.Raw) -> Any:
    return msgspec.json.decode(raw)
