"""Backfill a Prometheus with samples of the past: OpenMetrics written as a scrape would have stored them,
then `promtool tsdb create-blocks-from openmetrics` into the server's data directory.

A `Backfill` takes exposition text (the format 0.0.4 an exporter serves) at a timestamp, with the target
labels the scrape would add (`job`, `instance`), and keeps only the series it is told to keep (those the
queries that will read them select).

The samples carry no staleness markers (OpenMetrics has none): a series that ends is still seen by an
instant selector for the server's lookback delta after its last sample; the demo's Prometheus runs with a
lookback shorter than the sampling step for that reason (process.py).
"""

from __future__ import annotations

import logging
import math
import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

log = logging.getLogger(__name__)

# Blocks of up to ~20 days: promtool parses its whole input once per block it writes, so 2-hour blocks
# (its default) would read a week's file 84 times. The flag is hidden but present in promtool 2.x and 3.x.
MAX_BLOCK_DURATION = "480h"


_OWN_TARGET = re.compile(r'(^|,)(job|instance)="')
SEEN_MAX = 200_000  # lines remembered per target and file (Backfill.add); a day of the demo's has ~35,000


def _metric_name(line: str) -> str:
    brace, space = line.find("{"), line.find(" ")
    end = brace if brace != -1 and (space == -1 or brace < space) else space
    return line[:end]


_SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?")
_EQUAL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!=|!~|=)\s*"((?:[^"\\]|\\.)*)"')

Wanted = Mapping[str, tuple[tuple[str, ...], ...] | None]


def selected_series(exprs: Iterable[str]) -> Wanted:
    """Return, per metric name in PromQL `exprs`, the label pairs (`k="v"`) some selector of it requires,
    one tuple per selector, or None when a selector of it takes every series (a bare name, or only
    regex and negative matchers). Words that are not metric names (functions, labels) are returned too
    and match nothing an exporter serves."""
    out: dict[str, list[tuple[str, ...]] | None] = {}
    for expr in exprs:
        for m in _SELECTOR.finditer(expr):
            name, braces = m.group(1), m.group(2)
            pairs = tuple(
                f'{k}="{v}"' for k, op, v in _EQUAL.findall(braces or "") if op == "=" and k != "job"
            )
            if not pairs:
                out[name] = None
            elif name not in out:
                out[name] = [pairs]
            elif (known := out[name]) is not None and pairs not in known:
                known.append(pairs)
    return {k: (None if v is None else tuple(v)) for k, v in out.items()}


class PromtoolMissing(RuntimeError):
    """No promtool binary on PATH (the Debian package prometheus ships it)."""


def find_promtool(binary: str = "promtool") -> str:
    """Return promtool's path; raise PromtoolMissing without it."""
    exe = shutil.which(binary)
    if exe is None:
        raise PromtoolMissing(f"{binary} is not on PATH: install the Debian package prometheus")
    return exe


@dataclass(frozen=True, slots=True)
class BlocksWritten:
    samples: int
    files: int  # OpenMetrics files turned into blocks
    seconds: float  # from the first promtool started to the last one done
    waited: float  # of which after the last sample was added (what `close` waited)


class Backfill:
    """Samples written as OpenMetrics files of `chunk` seconds of sample time each, under `workdir`, each
    turned into TSDB blocks in `into` (a Prometheus data directory) by promtool as soon as it is complete,
    in the background: the conversion of one day runs on another core while the next is being sampled.
    `close()` waits for the last; the server loads the blocks on its next block reload, or restart.
    A file holds the samples of (origin + k·chunk, origin + (k+1)·chunk]: those a range query evaluated at
    the chunk's end reads, so that `settled()` can say which ranges are complete on disk.

    `keep`: the series to write (`selected_series`); others are dropped. A week of every series the
    simulator's exporters serve is ~450 MB of text; of those the fairness report reads, ~300 MB.

    Samples must be added in time order (each series' samples must increase in time, and a chunk is
    handed to promtool once a later sample arrives)."""

    def __init__(
        self,
        workdir: Path,
        *,
        keep: Wanted,
        into: Path,
        promtool: str,
        chunk: float = 86400.0,
        origin: float = 0.0,
    ) -> None:
        self.workdir = workdir
        self.keep = dict(keep)
        self.into = into
        self.promtool = promtool
        self.chunk = chunk
        self.origin = origin
        self.samples = 0
        self._out: TextIO | None = None
        self._path = workdir / "backfill-000.om"
        self._chunk_end = -math.inf
        self._files = 0
        # Each promtool run, with the file it reads and the end of that file's chunk.
        self._running: list[tuple[subprocess.Popen[bytes], Path, float]] = []
        self._settled = -math.inf
        self._started: float | None = None
        self._seen: dict[tuple[str, str], dict[str, str | None]] = {}
        into.mkdir(parents=True, exist_ok=True)

    def _rotate(self, at: float) -> None:
        self._finish_file()
        self._seen.clear()
        self._files += 1
        path = self.workdir / f"backfill-{self._files:03d}.om"
        self._out = path.open("w", encoding="utf-8")
        self._path = path
        self._chunk_end = self.origin + math.ceil((at - self.origin) / self.chunk) * self.chunk

    def _finish_file(self) -> None:
        if self._out is None:
            return
        self._out.write("# EOF\n")
        self._out.close()
        self._out = None
        if self._started is None:
            self._started = time.perf_counter()
        err = self._path.with_suffix(".log").open("wb")
        with err:
            proc = subprocess.Popen(
                [
                    self.promtool,
                    "tsdb",
                    "create-blocks-from",
                    "openmetrics",
                    f"--max-block-duration={MAX_BLOCK_DURATION}",
                    "--quiet",
                    str(self._path),
                    str(self.into),
                ],
                stdout=err,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self._running.append((proc, self._path, self._chunk_end))

    def add(self, text: str, at: float, *, job: str, instance: str) -> None:
        """Add every kept sample of exposition `text` at `at` (epoch seconds), labelled with the target's
        `job` and `instance` where the text does not name them itself (as `honor_labels: true` keeps an
        exporter's own; Watchtower's /metrics names neither)."""
        if at > self._chunk_end:
            self._rotate(at)
        assert self._out is not None
        stamp = f" {at:.3f}\n"
        # A line's fate depends on the line and the target alone, and most lines of one target come back
        # unchanged at the next sample (a pod's requests, phase, owner): each is worked out once.
        seen = self._seen.setdefault((job, instance), {})
        if len(seen) > SEEN_MAX:
            seen.clear()
        out = []
        for line in text.splitlines():
            if not line or line[0] == "#":
                continue
            if line in seen:
                head = seen[line]
            else:
                head = seen[line] = self._series_line(line, job, instance)
            if head is not None:
                out.append(head + stamp)
        self._out.writelines(out)
        self.samples += len(out)

    def _series_line(self, line: str, job: str, instance: str) -> str | None:
        """Return a sample line as written to the file, without its timestamp; None when not kept."""
        name = _metric_name(line)
        if name not in self.keep:
            return None
        rest = line[len(name) :]
        wanted = self.keep[name]
        if wanted is not None:
            own_pairs = "," + rest[1 : rest.rfind("}")] + ","
            if not any(all(f",{p}," in own_pairs for p in pairs) for pairs in wanted):
                return None
        target = f'job="{job}",instance="{instance}"'
        if rest[0] != "{":
            return f"{name}{{{target}}}{rest.rstrip()}"
        labels_end = rest.rfind("}")
        own = rest[1:labels_end]
        if _OWN_TARGET.search(own):
            # Rare (an exporter naming them): the text's own are kept, as honor_labels does.
            named = {m.group(2) for m in _OWN_TARGET.finditer(own)}
            pairs = [f'{k}="{v}"' for k, v in (("job", job), ("instance", instance)) if k not in named]
            labels = ",".join([*pairs, own])
        else:
            labels = f"{target},{own}" if own else target
        return f"{name}{{{labels}}}{rest[labels_end + 1 :].rstrip()}"

    def settled(self) -> float:
        """Return the time up to which (inclusive) every sample added is in blocks in `into`: the end of
        the last chunk of the unbroken run of files promtool has converted without error (-inf before
        the first). Polls the runs; never waits."""
        for proc, _, chunk_end in self._running:
            if chunk_end <= self._settled:
                continue
            if proc.poll() != 0:  # still running, or failed (close() reports it)
                break
            self._settled = chunk_end
        return self._settled

    def close(self) -> BlocksWritten:
        """Hand the last file to promtool and wait for every run; the files are removed. Raises
        RuntimeError naming the first promtool run that failed."""
        t0 = time.perf_counter()
        self._finish_file()
        failed = ""
        for proc, path, _ in self._running:
            proc.wait()
            log_path = path.with_suffix(".log")
            if proc.returncode != 0 and not failed:
                failed = f"promtool exited with status {proc.returncode} on {path.name}: "
                failed += log_path.read_text(errors="replace")[-600:]
            path.unlink(missing_ok=True)
            log_path.unlink(missing_ok=True)
        self._running.clear()
        if failed:
            raise RuntimeError(failed)
        done = time.perf_counter()
        return BlocksWritten(self.samples, self._files, done - (self._started or done), done - t0)

    def abort(self) -> None:
        """Stop: the file being written is dropped and the promtool runs still going are ended (by pid)."""
        if self._out is not None:
            self._out.close()
            self._out = None
            self._path.unlink(missing_ok=True)
        for proc, path, _ in self._running:
            if proc.poll() is None:
                proc.terminate()
            proc.wait()
            path.unlink(missing_ok=True)
            path.with_suffix(".log").unlink(missing_ok=True)
        self._running.clear()
