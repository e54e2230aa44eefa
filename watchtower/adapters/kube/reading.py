"""What every form's decoding shares: times, the settings of what is kept, values shared among
records, the checks of an object's name, and one way to turn a read error into a DecodeError.

The per-form decoding lives in `forms/` (one module per queue form); `decoder.ObjectDecoder` builds
one `Reading` and hands it to each.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple, Protocol, TypeVar, overload

import msgspec

from watchtower.domain.forms.dra.records import GPU_DEVICE_CLASS
from watchtower.domain.records import Controller, OwnerRef
from watchtower.ports import DecodeError

from . import wire
from .quantities import pod_sums, sums_key

TIMES: dict[str, float] = {}  # parse_time's memo; the pod path reads it inline
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SHARED_LIMIT = 500_000  # distinct values remembered before starting over: hostile churn stays bounded
NO_SPEC = wire.PodSpec()

Raw = bytes | msgspec.Raw
_W = TypeVar("_W")
_R = TypeVar("_R")
_M = TypeVar("_M", bound=wire.Meta)


def parse_time(ts: str | None) -> float | None:
    """Return RFC 3339 time (metav1.Time or MicroTime) as epoch seconds; None when absent; ValueError if bad."""
    if not ts:
        return None
    t = TIMES.get(ts)
    if t is None:
        dt = datetime.fromisoformat(ts)  # takes the "Z" suffix since Python 3.11
        if dt.tzinfo is None:
            raise ValueError(f"time without zone: {ts[:40]!r}")
        t = (dt - _EPOCH).total_seconds()  # a third cheaper than dt.timestamp()
        if len(TIMES) > 200_000:
            TIMES.clear()
        TIMES[ts] = t
    return t


def wrap(e: Exception, kind: str) -> DecodeError:
    if isinstance(e, DecodeError):
        return e
    return DecodeError(f"{kind}: {e}", kind=kind)


def reader(kind: str, wire_type: type[_W], convert: Callable[[_W], _R]) -> Callable[[Raw], _R]:
    """Return the decoding of one kind: JSON into `wire_type`, then `convert` into a domain record; its
    msgspec and value errors become a DecodeError naming the kind."""
    dec: msgspec.json.Decoder[_W] = msgspec.json.Decoder(wire_type)

    def read(raw: Raw) -> _R:
        try:
            return convert(dec.decode(raw))
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError) as e:
            raise wrap(e, kind) from e

    return read


def named(meta: _M | None, kind: str, *, namespaced: bool = True) -> _M:
    """Return an object's metadata; raise DecodeError when it lacks the name (or namespace) it needs."""
    if meta is None:
        raise DecodeError(f"{kind} without metadata", kind=kind)
    if not meta.name:
        raise DecodeError(f"{kind} without a name", kind=kind, uid=meta.uid or "")
    if namespaced and not meta.namespace:
        raise DecodeError(f"{kind} {meta.name!r} without a namespace", kind=kind, uid=meta.uid or "")
    return meta


class ListPage(Sequence[msgspec.Raw]):
    """One LIST response: its items as raw objects, split out of the body only when first read.

    The pods form decodes a page of pods straight from `body` in one pass instead, and notes how
    many there were, so that counting them does not split the body either.
    """

    __slots__ = ("_items", "_split_body", "body", "size")

    def __init__(
        self, body: bytes, split: Callable[[bytes], list[msgspec.Raw]], items: list[msgspec.Raw] | None = None
    ) -> None:
        self.body = body
        self._split_body = split
        self._items = items
        self.size: int | None = None if items is None else len(items)

    @property
    def unsplit(self) -> bool:
        return self._items is None

    def _split(self) -> list[msgspec.Raw]:
        """Return the raw items; raise DecodeError when the body cannot be read."""
        if self._items is None:
            self._items = self._split_body(self.body)
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


class PageReader(Protocol):
    def __call__(self, items: Iterable[Raw], on_error: Callable[[DecodeError], None], /) -> Iterator[Any]: ...


class KindReader(NamedTuple):
    """How a form decodes one kind: an object alone, and (for the kinds listed by the hundred thousand)
    a whole LIST page in one pass."""

    read: Callable[[Raw], Any]
    page: PageReader | None = None


@dataclass
class Reading:
    """The settings of what is kept, and the values shared among the records of every form."""

    team_label: str = "team"
    keep_labels: frozenset[str] = field(default_factory=frozenset)
    keep_annotations: frozenset[str] = field(default_factory=frozenset)
    annotation_limit: int = 2048
    gpu_device_classes: frozenset[str] = frozenset({GPU_DEVICE_CLASS})
    kueue_gpu_resources: frozenset[str] = frozenset()
    report_annotation: str = ""
    read_notify: bool = False  # read the owner-notice annotation into Pod.notify and Controller.notify
    # One object per distinct value (namespaces, node names, owners, messages, label sets): 150,000
    # pods repeat a few thousand of them, and a separate copy each would cost ~1 KB per pod.
    shared: dict[object, Any] = field(default_factory=dict)
    sums: dict[object, tuple[int, int, int]] = field(default_factory=dict)
    # What the forms read around without dropping the object (a pod's odd gate name, ...), by what: counted
    # per decoder, so that nothing is kept at module level.
    read_around: Counter[str] = field(default_factory=Counter)

    def share_str(self, s: str) -> str:
        shared = self.shared
        if len(shared) > SHARED_LIMIT:
            shared.clear()
        out: str = shared.setdefault(s, s)
        return out

    def sums_of(self, spec: wire.PodSpec) -> tuple[int, int, int]:
        """Return a pod spec's (GPUs, CPU millis, memory bytes), memoised on its resources' JSON text:
        specs repeat across a controller's pods, its templates and every MODIFIED of either."""
        ctrs = spec.containers
        if ctrs is not None and len(ctrs) == 1 and not spec.initContainers and not len(spec.overhead):
            skey: object = bytes(ctrs[0].resources)  # the usual pod: one container
        else:
            skey = sums_key(spec)
        sums = self.sums.get(skey)
        if sums is None:
            sums = pod_sums(spec)
            if len(self.sums) > 10_000:
                self.sums.clear()
            self.sums[skey] = sums
        return sums

    def controller(
        self, kind: str, meta: wire.ControllerMeta | None, roles: list[tuple[int, wire.Template | None]]
    ) -> Controller:
        """Return the record of a controller whose pods are `roles`: (how many, from which template).

        Only what its pods would be (DESIGN §3.15), for work a ResourceQuota refuses. The class is the
        one of the role asking the most GPUs per pod (a PaddleJob's workers, not its CPU-only
        parameter servers)."""
        if meta is None or not meta.name or not meta.namespace:
            what = "metadata" if meta is None else "a namespace" if meta.name else "a name"
            raise DecodeError(f"{kind} without {what}", kind=kind, uid=(meta.uid or "") if meta else "")
        m = meta
        owner = None
        for o in m.ownerReferences or ():
            if o.controller:
                owner = OwnerRef(o.kind, o.name, o.apiVersion, o.uid)
        share = self.shared.setdefault
        pods = gpus = per_pod = 0
        pclass, priority, top = "", None, -1
        for count, template in roles:
            tspec = (template.spec if template is not None else None) or NO_SPEC
            g = self.sums_of(tspec)[0]
            count = max(0, count)
            pods += count
            gpus += count * g
            per_pod = max(per_pod, g)
            if g > top:
                top, pclass, priority = g, tspec.priorityClassName or "", tspec.priority
        ns = m.namespace or ""
        # Cut as a pod's is: a hostile value is refused whole later (domain/owners/resolve.py).
        notify = m.annotations.notify if self.read_notify and m.annotations is not None else None
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
            notify=(notify or "")[: self.annotation_limit],
        )
