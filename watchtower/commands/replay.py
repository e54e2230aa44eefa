"""`watchtower replay`: a trace replayed under each policy file, the runs side by side as text, JSON, CSV or
an HTML page (docs/replay.md)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from watchtower.services.replay import NamedPolicy, ReplayInputError, read_policy, replay_document
from watchtower.services.replay_formats import as_csv, as_json, as_text

FORMATS = ("text", "json", "csv", "html")
NOT_RECORDED = "--week: weeks are not recorded for replay yet: use --trace FILE (docs/replay.md)"


def _lines(path: Path) -> Iterator[str]:
    """Yield the file's lines one by one (the trace parser's row cap refuses a huge file as it reads)."""
    try:
        with path.open(encoding="utf-8", newline="") as f:
            yield from f
    except OSError as e:
        raise ReplayInputError(str(path), [f"cannot read: {e.strerror}"]) from None
    except UnicodeDecodeError:
        raise ReplayInputError(str(path), ["not UTF-8 text"]) from None


def load_policy(path: Path) -> NamedPolicy:
    """Return the policy file at `path`, named after the file unless it says `name:`; ReplayInputError
    naming the file and each problem's key."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ReplayInputError(str(path), [f"cannot read: {e.strerror}"]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ReplayInputError(str(path), ["not UTF-8 text"]) from None
    return read_policy(text, str(path), default_name=path.stem)


def render(doc: dict[str, Any], fmt: str) -> bytes:
    """Return the document in `fmt` (one of FORMATS)."""
    if fmt == "json":
        return as_json(doc)
    if fmt == "csv":
        return as_csv(doc).encode()
    if fmt == "html":
        from watchtower.bootstrap import replay_presenter

        return replay_presenter().page(doc).encode()
    return as_text(doc).encode()


def run_replay(trace: Path, policies: Sequence[Path], fmt: str) -> bytes:
    """Return the replay of `trace` under each policy file in `fmt`; raise ReplayInputError naming the file
    (and the row or key) of the first bad input."""
    named = [load_policy(p) for p in policies]
    doc = replay_document(lambda: _lines(trace), named, trace_source=str(trace))
    return render(doc, fmt)
