"""Splitting a watch stream into its JSON lines, whatever the chunk boundaries."""

from __future__ import annotations


class LineSplitter:
    """Collects chunks and gives back complete lines; keeps the unfinished tail for the next chunk."""

    def __init__(self, max_line: int = 64 * 1024 * 1024) -> None:
        self._tail = b""
        self._max = max_line

    def feed(self, chunk: bytes) -> list[bytes]:
        """Return the complete, non-empty lines the chunk finishes (without the newline)."""
        data = self._tail + chunk if self._tail else chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            if len(data) > self._max:
                raise ValueError(f"watch line longer than {self._max} bytes")
            self._tail = data
            return []
        self._tail = data[cut + 1 :]
        return [ln for ln in data[:cut].split(b"\n") if ln.strip()]

    def rest(self) -> bytes:
        """Return what is left unfinished (a truncated line when the stream ended) and forget it."""
        tail, self._tail = self._tail, b""
        return tail if tail.strip() else b""
