"""Applying API objects (from the Kubernetes adapter, the simulator or a dump) to the cluster state.

A malformed object is skipped, counted per kind and logged once per uid: the feed never dies of it.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import msgspec

from watchtower.adapters.kube_decode import DecodeError, ObjectDecoder
from watchtower.domain.state import ClusterState, Happening

log = logging.getLogger(__name__)

KINDS = ("Pod", "Event", "Node", "Namespace", "PriorityClass", "ResourceQuota")


@dataclass(frozen=True, slots=True)
class Skipped:
    kind: str
    uid: str
    name: str
    error: str


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
        """Make the state's objects of `kind` exactly these (a LIST): apply each, drop the ones absent."""
        out: list[Happening] = []
        st = self.state
        if kind == "Pod":
            pods = []
            for raw in raws:
                try:
                    pods.append(self.decoder.pod(raw))
                except DecodeError as e:
                    self._skip(kind, e)
            return st.replace_pods(pods)
        seen: set[object] = set()
        for raw in raws:
            out.extend(self.apply(kind, "ADDED", raw))
            try:
                if kind == "Node":
                    seen.add(self.decoder.node(raw).name)
                elif kind == "Namespace":
                    seen.add(self.decoder.namespace(raw).name)
                elif kind == "PriorityClass":
                    seen.add(self.decoder.priority_class(raw).name)
                elif kind == "ResourceQuota":
                    q = self.decoder.quota(raw)
                    seen.add((q.namespace, q.name))
            except DecodeError:
                pass
        table: dict[object, object] | None = {
            "Node": st.nodes,
            "Namespace": st.namespaces,
            "PriorityClass": st.priority_classes,
            "ResourceQuota": st.quotas,
        }.get(kind)  # type: ignore[assignment]
        if table is not None:
            for key in [k for k in table if k not in seen]:
                del table[key]
        return out
