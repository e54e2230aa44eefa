"""Applying API objects (from the Kubernetes adapter, the simulator or a dump) to the cluster state.

A malformed object is skipped, counted per kind and logged once per uid: the feed never dies of it.
"""

from __future__ import annotations

import contextlib
import gc
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import msgspec

from watchtower.adapters.kube.decoder import DecodeError, ObjectDecoder
from watchtower.domain.state import ClusterState, Happening

log = logging.getLogger(__name__)

KINDS = ("Pod", "Event", "Node", "Namespace", "PriorityClass", "ResourceQuota")


@dataclass(frozen=True, slots=True)
class Skipped:
    kind: str
    uid: str
    name: str
    error: str


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for one LIST page, unless someone else already paused it.

    Decoding a page of 500 pods allocates ~2,000 lists that live until the page is applied: enough to
    set off three young collections per page, whose survivors are promoted and, every few dozen pages,
    walked again by a full collection of the whole heap. All of it is acyclic and freed by reference
    counting at the end of the page, so the collector would find nothing: pausing it saved ~5 µs of
    the ~55 µs per pod of a 150,000-pod LIST (bench/ingest.py). Collection resumes after the page.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Ingestor:
    """Decodes raw objects and applies them to one `ClusterState`."""

    def __init__(
        self,
        state: ClusterState,
        decoder: ObjectDecoder,
        *,
        on_skip: Callable[[Skipped], None] | None = None,
        report_limit: int = 10_000,
    ) -> None:
        self.state = state
        self.decoder = decoder
        self.skipped: Counter[str] = Counter()
        self.skips: list[Skipped] = []  # the first `report_limit`, for analyze and /readyz
        self._on_skip = on_skip
        self._reported: set[str] = set()
        self._report_limit = report_limit
        # Per kind with a LIST under way: the keys held before it that no page has listed yet.
        self._unlisted: dict[str, set[object]] = {}

    def _skip(self, kind: str, err: DecodeError | Exception) -> None:
        uid = getattr(err, "uid", "") or ""
        name = getattr(err, "name", "") or ""
        kind = getattr(err, "kind", "") or kind or "Unknown"
        self.skipped[kind] += 1
        key = f"{kind}/{uid or name or str(err)[:80]}"
        if key in self._reported:
            return
        self._reported.add(key)
        s = Skipped(kind, uid, name, str(err)[:300])
        if len(self.skips) < self._report_limit:
            self.skips.append(s)
        log.warning("skipped malformed %s %s: %s", kind, uid or name or "(no uid)", s.error)
        if self._on_skip is not None:
            self._on_skip(s)

    def apply(self, kind: str, event_type: str, raw: bytes | msgspec.Raw) -> list[Happening]:
        """Apply one ADDED/MODIFIED/DELETED object of a kind; return what newly happened."""
        st, dec = self.state, self.decoder
        deleted = event_type == "DELETED"
        try:
            if kind == "Pod":
                pod = dec.pod(raw)
                return st.delete_pod(pod.uid, pod) if deleted else st.upsert_pod(pod)
            if kind == "Event":
                return [] if deleted else st.upsert_event(dec.event(raw))
            if kind == "Node":
                n = dec.node(raw)
                st.delete_node(n.name) if deleted else st.upsert_node(n)
            elif kind == "Namespace":
                ns = dec.namespace(raw)
                st.delete_namespace(ns.name) if deleted else st.upsert_namespace(ns)
            elif kind == "PriorityClass":
                pc = dec.priority_class(raw)
                st.delete_priority_class(pc.name) if deleted else st.upsert_priority_class(pc)
            elif kind == "ResourceQuota":
                q = dec.quota(raw)
                st.delete_quota(q.namespace, q.name) if deleted else st.upsert_quota(q)
        except DecodeError as e:
            self._skip(kind, e)
        except Exception as e:  # a bug of ours on hostile input must not stop the feed either
            log.exception("unexpected error applying %s", kind)
            self._skip(kind, e)
        return []

    def replace(self, kind: str, raws: Iterable[bytes | msgspec.Raw]) -> list[Happening]:
        """Make the state's objects of `kind` exactly these (a whole LIST); return what newly happened."""
        return self.list_page(kind, raws, first=True, last=True)

    def list_page(
        self, kind: str, raws: Iterable[bytes | msgspec.Raw], *, first: bool = True, last: bool = True
    ) -> list[Happening]:
        """Apply one page of a LIST of `kind`; at the `last` page drop the objects no page listed.

        `first` notes the objects held now; each listed object is crossed off; what is left at `last` was
        deleted while the watch was down. Pages are applied as they come, so a long list is never held.
        Raises DecodeError when the page as a whole cannot be read (the source then lists again).
        """
        with _collector_paused():
            return self._list_page(kind, raws, first=first, last=last)

    def _list_page(
        self, kind: str, raws: Iterable[bytes | msgspec.Raw], *, first: bool, last: bool
    ) -> list[Happening]:
        st = self.state
        if first or kind not in self._unlisted:
            self._unlisted[kind] = set(self._keys(kind))
        unlisted = self._unlisted[kind]
        out: list[Happening] = []
        if kind == "Pod":
            upsert = st.upsert_pod
            pods = self.decoder.pods(raws, lambda e: self._skip("Pod", e))
            if unlisted:
                discard = unlisted.discard
                for pod in pods:
                    discard(pod.uid)
                    happened = upsert(pod)
                    if happened:
                        out.extend(happened)
            else:  # the first list: nothing held before to cross off
                for pod in pods:
                    happened = upsert(pod)
                    if happened:
                        out.extend(happened)
        else:
            for raw in raws:
                key = self._upsert(kind, raw, out)
                if key is not None:
                    unlisted.discard(key)
        if last:
            for key in self._unlisted.pop(kind):
                out.extend(self._delete(kind, key))
        return out

    def _keys(self, kind: str) -> Iterable[object]:
        st = self.state
        tables: dict[str, Iterable[object]] = {
            "Pod": st.pods,
            "Node": st.nodes,
            "Namespace": st.namespaces,
            "PriorityClass": st.priority_classes,
            "ResourceQuota": st.quotas,
        }
        return tables.get(kind, ())  # events expire on their own; a re-list does not drop them

    def _upsert(self, kind: str, raw: bytes | msgspec.Raw, out: list[Happening]) -> object | None:
        """Apply one listed object other than a pod; return its key, None when it was skipped."""
        st, dec = self.state, self.decoder
        try:
            if kind == "Node":
                n = dec.node(raw)
                st.upsert_node(n)
                return n.name
            if kind == "Namespace":
                ns = dec.namespace(raw)
                st.upsert_namespace(ns)
                return ns.name
            if kind == "PriorityClass":
                pc = dec.priority_class(raw)
                st.upsert_priority_class(pc)
                return pc.name
            if kind == "ResourceQuota":
                q = dec.quota(raw)
                st.upsert_quota(q)
                return (q.namespace, q.name)
            out.extend(self.apply(kind, "ADDED", raw))
        except DecodeError as e:
            self._skip(kind, e)
        except Exception as e:  # a bug of ours on hostile input must not stop the feed either
            log.exception("unexpected error applying a listed %s", kind)
            self._skip(kind, e)
        return None

    def _delete(self, kind: str, key: object) -> list[Happening]:
        st = self.state
        if isinstance(key, tuple):  # a ResourceQuota: (namespace, name)
            st.delete_quota(*key)
        elif not isinstance(key, str):
            pass
        elif kind == "Pod":
            return st.delete_pod(key)
        elif kind == "Node":
            st.delete_node(key)
        elif kind == "Namespace":
            st.delete_namespace(key)
        elif kind == "PriorityClass":
            st.delete_priority_class(key)
        return []
