"""The gated form: it has no kind of its own. Its part of decoding is a pod's gates and its Kueue pod group's
size, read by the pods form (forms/pods.py) with these helpers: bad input is a counted, logged fallback
(an odd gate name is left out, a group size that is not a number reads as 0), never a dropped pod.
"""

from __future__ import annotations

import logging
import re

import msgspec

from ..reading import KindReader, Reading

log = logging.getLogger(__name__)

# A qualified name, as the API server validates a gate's (k8s.io/apimachinery validation IsQualifiedName):
# an optional DNS-subdomain prefix and "/", then up to 63 alphanumerics, "-", "_", "." inside.
_QUALIFIED = re.compile(
    r"(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)


class _Gate(msgspec.Struct, gc=False):
    name: object = None


_DEC_GATE = msgspec.json.Decoder(_Gate)
_LIMIT = 10_000


class GateReader:
    """Reads a pod's gates and its Kueue pod group's size for the pods form. One per decoder: it counts what
    it read around in the decoder's `Reading.read_around` (`odd_gate`: a gate whose name is no qualified
    name; `bad_group_total`: a pod-group-total-count that is not a positive number)."""

    def __init__(self, ctx: Reading) -> None:
        self._counts = ctx.read_around
        self._names: dict[tuple[bytes, ...], tuple[str, ...]] = {}

    def _odd(self, what: str, value: object) -> None:
        n = self._counts[what] = self._counts[what] + 1
        if n <= 10 or n % 1000 == 0:  # a storm of bad pods must not flood the log
            log.warning("pod read around %s %r (%d so far)", what.replace("_", " "), value, n)

    def names(self, raws: list[msgspec.Raw]) -> tuple[str, ...]:
        """Return the names of a pod's `spec.schedulingGates`, sorted, odd ones left out (counted and
        logged). One shared tuple per distinct list: a Kueue pod group's pods all carry the same gates."""
        key = tuple(bytes(r) for r in raws)
        got = self._names.get(key)
        if got is not None:
            return got
        names: set[str] = set()
        for b in key:
            try:
                name = _DEC_GATE.decode(b).name
            except (msgspec.DecodeError, msgspec.ValidationError):
                name = None
            if isinstance(name, str) and len(name) <= 316 and _QUALIFIED.fullmatch(name):
                names.add(name)
            else:
                self._odd("odd_gate", name if name is not None else b[:80])
        if len(self._names) > _LIMIT:
            self._names.clear()
        got = self._names[key] = tuple(sorted(names))
        return got

    def total(self, text: str | None) -> int:
        """Return Kueue's `pod-group-total-count` as a number: 0 when absent, or when not a positive number
        (counted and logged; the group is then as large as the pods seen)."""
        if not text:
            return 0
        try:
            n = int(text)
        except ValueError:
            n = 0
        if n <= 0:
            self._odd("bad_group_total", text)
            return 0
        return n


def readers(ctx: Reading) -> dict[str, KindReader]:
    """Return how this form decodes each of its kinds: it has none (its facts are the pods')."""
    return {}
