"""Text as Alertmanager's Go code writes it: `strconv.Quote`, `regexp.QuoteMeta`, RFC 3339 with Go's
shortest fraction, a label set's `String()` and FNV-1a 64 fingerprint (prometheus/common `model`).

Receivers written for Alertmanager compare these strings (group keys, fingerprints, receiver names), so
they are produced here byte for byte as Go produces them, and checked against Alertmanager's own code by
tests/go/webhookcheck.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache

ZERO_TIME = "0001-01-01T00:00:00Z"  # Go's time.Time{} in JSON

# prometheus/common model/fnv.go: FNV-1a 64.
_OFFSET64 = 14695981039346656037
_PRIME64 = 1099511628211
_MASK64 = (1 << 64) - 1

# Go's strconv escapes for the runes that have a short form.
_SHORT = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
_SHORT.update({"\\": "\\\\", '"': '\\"'})
# regexp.QuoteMeta's special bytes.
_META = frozenset("\\.+*?()|[]{}^$")


@lru_cache(maxsize=1 << 16)
def _fold(h: int, name: str, value: str) -> int:
    """Return the FNV-1a 64 state `h` after `name` 0xff `value` 0xff."""
    # Cached on (state, pair): label sets sorted by name share their first pairs (alertname, gpus,
    # kind, namespace, ...), so in a storm only the last, distinct pairs are hashed byte by byte.
    for b in name.encode() + b"\xff" + value.encode("utf-8", "surrogateescape") + b"\xff":
        h = ((h ^ b) * _PRIME64) & _MASK64
    return h


def fingerprint(labels: Mapping[str, str]) -> str:
    """Return the label set's fingerprint as Alertmanager prints it: FNV-1a 64 over each name and value
    (sorted by name) followed by the byte 0xff, as 16 lower-case hex digits."""
    h = _OFFSET64
    for k in sorted(labels):
        h = _fold(h, k, labels[k])
    return f"{h:016x}"


def quote(s: str) -> str:
    """Return `s` as Go's strconv.Quote writes it."""
    out = ['"']
    for ch in s:
        short = _SHORT.get(ch)
        if short is not None:
            out.append(short)
        elif ch.isprintable():  # Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols, ' '
            out.append(ch)
        else:
            o = ord(ch)
            out.append(
                f"\\x{o:02x}" if o < 0x20 or o == 0x7F else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"
            )
    out.append('"')
    return "".join(out)


def label_set(labels: Mapping[str, str]) -> str:
    """Return model.LabelSet.String(): `{a="1", b="2"}`, sorted by name, values quoted as Go does."""
    return "{" + ", ".join(f"{k}={quote(labels[k])}" for k in sorted(labels)) + "}"


def quote_meta(s: str) -> str:
    """Return regexp.QuoteMeta(s): Alertmanager escapes the receiver name of a notification so."""
    return "".join("\\" + c if c in _META else c for c in s)


@lru_cache(maxsize=4096)
def rfc3339nano(t: float | None) -> str:
    """Return `t` as Go writes a time.Time in JSON (RFC3339Nano, UTC): trailing zeros of the fraction
    dropped, no fraction for a whole second; Go's zero time for none."""
    # Cached: the alerts of a storm share a handful of start times. Microseconds: a float Unix time
    # holds no more.
    if t is None:
        return ZERO_TIME
    us = round(t * 1_000_000)
    sec, frac = divmod(us, 1_000_000)
    head = datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{head}.{frac:06d}".rstrip("0") + "Z" if frac else head + "Z"
