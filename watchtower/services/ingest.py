"""Applying API objects (from the Kubernetes adapter, the simulator or a dump) to the cluster state.

Each watched kind (domain/kinds.py) is bound here to the decoder, by the kind's name, and to the state's
part for it (`ClusterState.bindings()`: its upsert, delete and held objects). A malformed object is skipped, counted per kind and logged once per uid: the feed never dies
of it. An object of a kind nobody reads is counted per kind and logged once per kind.
"""

from __future__ import annotations

import contextlib
import gc
import logging
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar

import msgspec

from watchtower.domain.forms.registry import WATCHED
from watchtower.domain.state import ClusterState, Happening
from watchtower.ports import DecodeError, ObjectDecoder

log = logging.getLogger(__name__)

# The kinds readiness waits for: an optional CRD may never be listed.
KINDS = tuple(k.name for k in WATCHED if not k.optional)

T = TypeVar("T")
Raw = bytes | msgspec.Raw


@dataclass(frozen=True, slots=True)
class Skipped:
    kind: str
    uid: str
    name: str
    error: str


@dataclass(frozen=True, slots=True)
class _Binding(Generic[T]):
    """How the objects of one kind reach the state."""

    decode: Callable[[Raw], T]  # raises DecodeError
    upsert: Callable[[T], list[Happening] | None]
    delete: Callable[[T], list[Happening] | None] | None  # None: a deletion changes nothing
    held: Mapping[Any, T] | None  # the state's objects by key; None: a re-list drops none of them
    key: Callable[[T], Hashable]  # of an object in `held`
    # Decodes a whole LIST page in one pass, handing each unusable object to its second argument.
    decode_page: Callable[[Iterable[Raw], Callable[[DecodeError], None]], Iterator[T]] | None = None


def _bindings(st: ClusterState, dec: ObjectDecoder) -> dict[str, _Binding[Any]]:
    """Return the binding of each watched kind, by name: the state's part for it (its form's), and the
    decoder by the kind's name. Raise KeyError when a watched kind has no part."""
    parts = st.bindings()
    out: dict[str, _Binding[Any]] = {}
    for kind in WATCHED:
        part = parts[kind.name]
        out[kind.name] = _Binding(
            partial(dec.decode, kind.name),
            part.upsert,
            part.delete,
            part.held,
            part.key,
            partial(dec.decode_page, kind.name) if part.paged else None,
        )
    return out


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
        self.ignored: Counter[str] = Counter()  # objects of kinds nobody reads, per kind
        self._on_skip = on_skip
        self._reported: set[str] = set()
        self._report_limit = report_limit
        self._bound = _bindings(state, decoder)
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

    def _ignore(self, kind: str, count: int) -> None:
        if count <= 0:
            return
        if kind not in self.ignored:
            log.info("ignoring objects of kind %s: Watchtower reads no such kind", kind[:80])
        self.ignored[kind] += count

    def apply(self, kind: str, event_type: str, raw: Raw) -> list[Happening]:
        """Apply one ADDED/MODIFIED/DELETED object of a kind; return what newly happened."""
        b = self._bound.get(kind)
        if b is None:
            self._ignore(kind, 1)
            return []
        act = b.delete if event_type == "DELETED" else b.upsert
        if act is None:
            return []
        try:
            happened = act(b.decode(raw))
        except DecodeError as e:
            self._skip(kind, e)
        except Exception as e:  # a bug of ours on hostile input must not stop the feed either
            log.exception("unexpected error applying %s", kind)
            self._skip(kind, e)
        else:
            if happened is not None:
                return happened
        return []

    def list_page(
        self, kind: str, raws: Iterable[Raw], *, first: bool = True, last: bool = True
    ) -> list[Happening]:
        """Apply one page of a LIST of `kind`; at the `last` page drop the objects no page listed.

        `first` notes the objects held now; each listed object is crossed off; what is left at `last` was
        deleted while the watch was down. Pages are applied as they come, so a long list is never held.
        Raises DecodeError when the page as a whole cannot be read (the source then lists again).
        """
        with _collector_paused():
            return self._list_page(kind, raws, first=first, last=last)

    def _list_page(self, kind: str, raws: Iterable[Raw], *, first: bool, last: bool) -> list[Happening]:
        b = self._bound.get(kind)
        if b is None:
            self._ignore(kind, sum(1 for _ in raws))
            return []
        held = b.held
        if first or kind not in self._unlisted:
            self._unlisted[kind] = set(held) if held is not None else set()
        unlisted = self._unlisted[kind]
        out: list[Happening] = []
        if b.decode_page is not None:
            upsert, key = b.upsert, b.key
            objs = b.decode_page(raws, partial(self._skip, kind))
            if unlisted:
                discard = unlisted.discard
                for obj in objs:
                    discard(key(obj))
                    happened = upsert(obj)
                    if happened:
                        out.extend(happened)
            else:  # the first list: nothing held before to cross off
                for obj in objs:
                    happened = upsert(obj)
                    if happened:
                        out.extend(happened)
        else:
            for raw in raws:
                obj = self._upsert(kind, b, raw, out)
                if obj is not None:
                    unlisted.discard(b.key(obj))
        if last:
            unlisted = self._unlisted.pop(kind)
            if held is not None and b.delete is not None:
                for k in unlisted:
                    gone = held.get(k)
                    happened = b.delete(gone) if gone is not None else None
                    if happened:
                        out.extend(happened)
        return out

    def _upsert(self, kind: str, b: _Binding[T], raw: Raw, out: list[Happening]) -> T | None:
        """Apply one listed object decoded on its own; return it, or None when it was skipped."""
        try:
            obj = b.decode(raw)
            happened = b.upsert(obj)
        except DecodeError as e:
            self._skip(kind, e)
            return None
        except Exception as e:  # a bug of ours on hostile input must not stop the feed either
            log.exception("unexpected error applying a listed %s", kind)
            self._skip(kind, e)
            return None
        if happened:
            out.extend(happened)
        return obj
