"""The pods form: pods and what every form reads beside them (events, nodes, namespaces, classes).

The pod record is built in one inline pass (`PodReader._pod`), the budget of a 150,000-pod LIST: no
intermediate objects, one dict lookup per repeated value, and the resource sums memoised.

Size: over 400 lines because that pass and the memos of the values it shares among pods (owners, label sets,
groups, node selectors) are one piece, with each kept annotation (display notes, Volcano's group, Kueue's
group size, the owner-notice annotation) taken apart inline: moving the memos or the steps out would add a
call per pod to the LIST's budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType

import msgspec
from msgspec.structs import astuple

from watchtower.domain import kinds
from watchtower.domain.forms.gangs.records import (
    REF_PODGROUP,
    REF_VOLCANO,
    REF_WORKLOAD,
    VOLCANO_GROUP_ANNOTATION,
    GroupRef,
)
from watchtower.domain.forms.gated.records import KUEUE_POD_GROUP_TOTAL
from watchtower.domain.node_use import DEFAULT_SCHEDULER
from watchtower.domain.owners.resolve import NOTIFY_ANNOTATION
from watchtower.domain.records import (
    Condition,
    Event,
    Namespace,
    Node,
    ObjectRef,
    OwnerRef,
    Pod,
    PriorityClass,
)
from watchtower.domain.workloads import TEMPLATE_HASH_LABEL, WORKLOAD_LABELS
from watchtower.ports import DecodeError

from .. import wire
from ..quantities import GPU, ceil_int, parse_quantity
from ..reading import (
    NO_SPEC,
    SHARED_LIMIT,
    TIMES,
    KindReader,
    ListPage,
    Reading,
    named,
    parse_time,
    reader,
)
from ..wire import pod_types
from .dra import pod_claims
from .gated import GateReader

_NO_STRINGS: Mapping[str, str] = MappingProxyType({})
_NO_STATUS = wire.PodStatus()


class PodReader:
    """Decodes pods, keeping only the labels and annotations the domain reads."""

    def __init__(self, ctx: Reading) -> None:
        self._limit = ctx.annotation_limit
        self._shared = ctx.shared
        self._gates = GateReader(ctx)
        self._sums_of = ctx.sums_of
        self._labels = frozenset(ctx.keep_labels) | WORKLOAD_LABELS
        self._label_keys = tuple(sorted(self._labels | {TEMPLATE_HASH_LABEL}))
        # pod-template-hash is read into the ReplicaSet owner, not the pod's labels (unless configured).
        self._hash_at = self._label_keys.index(TEMPLATE_HASH_LABEL)
        self._hash_kept = TEMPLATE_HASH_LABEL in self._labels
        # Volcano's group annotation is always read (into the pod's group), a display note only if asked.
        notify = {NOTIFY_ANNOTATION} if ctx.read_notify else set()
        self._note_keys = tuple(
            sorted(set(ctx.keep_annotations) | {VOLCANO_GROUP_ANNOTATION, KUEUE_POD_GROUP_TOTAL} | notify)
        )
        # The owner-notice annotation goes to Pod.notify, a note too only if asked for display.
        self._notify_at = self._note_keys.index(NOTIFY_ANNOTATION) if notify else -1
        self._notify_noted = NOTIFY_ANNOTATION in ctx.keep_annotations
        self._group_at = self._note_keys.index(VOLCANO_GROUP_ANNOTATION)
        self._group_noted = VOLCANO_GROUP_ANNOTATION in ctx.keep_annotations
        # So is Kueue's pod-group size (into the pod's group_total).
        self._total_at = self._note_keys.index(KUEUE_POD_GROUP_TOTAL)
        self._total_noted = KUEUE_POD_GROUP_TOTAL in ctx.keep_annotations
        self._no_notes: tuple[None, ...] = (None,) * len(self._note_keys)
        self._groups: dict[tuple[str, str, str], GroupRef] = {}
        self._selectors: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
        pod_type, page_type = pod_types(self._label_keys, self._note_keys)
        self._dec_pod: msgspec.json.Decoder[wire.Pod] = msgspec.json.Decoder(pod_type)
        self._dec_pod_page: msgspec.json.Decoder[wire.PodPage] = msgspec.json.Decoder(page_type)
        self._owners: dict[tuple[str, str, str, str, str], OwnerRef] = {}
        self._label_sets: dict[tuple[str | None, ...], Mapping[str, str]] = {}
        self._images: dict[str, tuple[str]] = {}  # image → (image,), the images of one-container pods

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
            named(meta, "Pod")
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
        spec = p.spec or NO_SPEC
        st = p.status or _NO_STATUS
        shared = self._shared
        if len(shared) > SHARED_LIMIT:
            shared.clear()
            self._images.clear()
        share = shared.setdefault
        times = TIMES  # parse_time's memo, read inline: five look-ups per pod
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
                if len(self._owners) > SHARED_LIMIT:
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
        total = 0
        notify = ""
        if meta.annotations is not None:
            found = astuple(meta.annotations)
            if found != self._no_notes:  # most pods carry none of the kept annotations
                at = self._group_at
                volcano_group = found[at]
                if volcano_group is not None and not self._group_noted:
                    found = (*found[:at], None, *found[at + 1 :])
                at = self._total_at
                if found[at] is not None:
                    total = self._gates.total(found[at])
                    if not self._total_noted:
                        found = (*found[:at], None, *found[at + 1 :])
                limit = self._limit
                at = self._notify_at
                if at >= 0 and found[at] is not None:
                    notify = found[at][:limit]
                    if not self._notify_noted:
                        found = (*found[:at], None, *found[at + 1 :])
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
        gates_raw = spec.schedulingGates
        rc = spec.resourceClaims
        claims = pod_claims(rc, st.resourceClaimStatuses) if rc else ()
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
            bool(gates_raw),
            scheduled,
            disruption,
            start_time,
            running_since,
            parse_time(meta.deletionTimestamp) if meta.deletionTimestamp else None,
            reason,
            scheduler,
            group,
            claims,
            0,
            self._gates.names(gates_raw) if gates_raw else (),
            total,
            self._selector(spec.nodeSelector) if spec.nodeSelector else (),
            notify,
        )

    def _selector(self, sel: dict[str, str]) -> tuple[tuple[str, str], ...]:
        """Return the one shared tuple of a nodeSelector's pairs: a job's pods all select alike."""
        pairs = tuple(sorted(sel.items()))
        got = self._selectors.get(pairs)
        if got is None:
            if len(self._selectors) > SHARED_LIMIT:
                self._selectors.clear()
            got = self._selectors[pairs] = pairs
        return got

    def _group(self, source: str, name: str, part: str) -> GroupRef:
        """Return the one shared reference to a pod group: a gang's pods all name it."""
        key = (source, name, part)
        ref = self._groups.get(key)
        if ref is None:
            if len(self._groups) > SHARED_LIMIT:
                self._groups.clear()
            ref = self._groups[key] = GroupRef(source, name, part)
        return ref

    def _label_set(self, values: tuple[str | None, ...]) -> Mapping[str, str]:
        """Return the one shared read-only mapping of the kept labels with these values (None: absent)."""
        got = self._label_sets.get(values)
        if got is None:
            if len(self._label_sets) > SHARED_LIMIT:
                self._label_sets.clear()
            kept = {k: v for k, v in zip(self._label_keys, values, strict=True) if v is not None}
            got = self._label_sets[values] = MappingProxyType(kept) if kept else _NO_STRINGS
        return got


def _node(n: wire.Node) -> Node:
    meta = named(n.metadata, "Node", namespaced=False)
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
        labels=dict(n.metadata.labels or {}) if n.metadata is not None else {},
    )


def _priority_class(pc: wire.PriorityClass) -> PriorityClass:
    meta = named(pc.metadata, "PriorityClass", namespaced=False)
    if pc.value is None:
        raise DecodeError(f"PriorityClass {meta.name!r} without a value", kind="PriorityClass")
    return PriorityClass(
        meta.name or "",
        pc.value,
        pc.preemptionPolicy or "PreemptLowerPriority",
        bool(pc.globalDefault),
    )


def _event(e: wire.Event) -> Event:
    meta = named(e.metadata, "Event")
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


def readers(ctx: Reading) -> dict[str, KindReader]:
    """Return how this form decodes each of its kinds, by kind name."""
    pods = PodReader(ctx)

    def namespace(n: wire.Namespace) -> Namespace:
        meta = named(n.metadata, "Namespace", namespaced=False)
        notes = meta.annotations or {}
        report_to = notes.get(ctx.report_annotation, "") if ctx.report_annotation else ""
        return Namespace(
            meta.name or "",
            (meta.labels or {}).get(ctx.team_label, ""),
            report_to[: ctx.annotation_limit],
        )

    return {
        kinds.POD.name: KindReader(pods.pod, pods.pods),
        kinds.EVENT.name: KindReader(reader("Event", wire.Event, _event)),
        kinds.NODE.name: KindReader(reader("Node", wire.Node, _node)),
        kinds.NAMESPACE.name: KindReader(reader("Namespace", wire.Namespace, namespace)),
        kinds.PRIORITY_CLASS.name: KindReader(reader("PriorityClass", wire.PriorityClass, _priority_class)),
    }
