"""Kubernetes JSON → domain records: the `ObjectDecoder` port's adapter.

Lists, watch lines and object heads are read here; each kind is decoded by its queue form's module in
`forms/` (registered in `forms.FORMS`), so that the decoder has no method per kind. Each list item is
decoded on its own: one malformed object is reported and skipped, never the whole page.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from watchtower.domain.forms.dra.records import GPU_DEVICE_CLASS
from watchtower.ports import DecodeError as DecodeError  # re-exported: callers catch it from here

from . import forms, wire
from .forms import kueue
from .reading import KindReader, ListPage, Raw, Reading, parse_time, reader

__all__ = ["DecodeError", "ListPage", "ObjectDecoder", "parse_time"]


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
    read_notify: bool = False  # read pods' `watchtower.dev/notify` (owner notices)

    def __post_init__(self) -> None:
        self._ctx = Reading(
            self.team_label,
            frozenset(self.keep_labels),
            frozenset(self.keep_annotations),
            self.annotation_limit,
            self.gpu_device_classes,
            self.kueue_gpu_resources,
            self.report_annotation,
            self.read_notify,
        )
        self._readers: dict[str, KindReader] = forms.readers(self._ctx)
        self._pending_positions = reader("PendingWorkloads", kueue.PendingWorkloads, kueue.pending_positions)
        self._dec_head = msgspec.json.Decoder(wire.Head)
        self._dec_list = msgspec.json.Decoder(wire.List)
        self._dec_watch = msgspec.json.Decoder(wire.WatchEvent)

    @property
    def read_around(self) -> Counter[str]:
        """What the forms read around without dropping the object, by what (`odd_gate`, `bad_group_total`)."""
        return self._ctx.read_around

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
            return ListPage(data, self._split, items), rv, cont
        return ListPage(data, self._split), meta.resourceVersion or "", meta.cont or ""

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

    def _split(self, data: bytes) -> list[msgspec.Raw]:
        return self.decode_list(data)[0]

    # kinds: each by its form's reader

    def decode(self, kind: str, raw: Raw) -> Any:
        """Return the domain record of an object of a watched kind; raise DecodeError for an object the
        domain cannot use, KeyError for a kind no form reads."""
        return self._readers[kind].read(raw)

    def decode_page(
        self, kind: str, items: Iterable[Raw], on_error: Callable[[DecodeError], None]
    ) -> Iterator[Any]:
        """Yield the record of each item of a LIST page; hand each unusable one to `on_error` and go on.

        A kind whose form reads whole pages (pods) reads a `ListPage` in one pass over its body; raise
        DecodeError when the body cannot be read at all."""
        r = self._readers[kind]
        if r.page is not None:
            yield from r.page(items, on_error)
            return
        read = r.read
        for raw in items:
            try:
                yield read(raw)
            except DecodeError as e:
                on_error(e)

    def pending_positions(self, data: bytes) -> dict[tuple[str, str], int]:
        """Return the positions in a visibility API pendingworkloads body; raise DecodeError."""
        return self._pending_positions(data)

    def type_of(self, raw: bytes | msgspec.Raw) -> tuple[str, str]:
        """Return an object's (kind, apiVersion); raise DecodeError."""
        try:
            h = self._dec_head.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise DecodeError(f"unreadable object: {e}") from e
        return h.kind or "", h.apiVersion or ""
