"""The service's policy replays (`POST /api/v1/replays`): each request checked at once (its size, its
policies), then run in a bounded pool of worker processes, its result kept in memory under an id.

Worker processes rather than threads: a replay is pure Python for up to a minute, and in a thread it would
hold the interpreter's lock against the event loop's tick and the API for all that time. The pool is started
on the first request (a service never asked for a replay starts no process), its processes spawned rather
than forked (a fork of a process with running threads may inherit a held lock), and `close()` ends them at
shutdown so a replay in progress never holds up a pod's stop.
"""

from __future__ import annotations

import io
import logging
import multiprocessing
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from watchtower.config.replay import ReplayConfig

from .replay import ReplayInputError, count_rows, read_policy, replay_document, unique_names

log = logging.getLogger(__name__)
T = TypeVar("T")

# CPU seconds per job and policy, with room to spare: bench/replay.py measures ~0.2 ms on one core.
SECONDS_PER_JOB = 0.0005


class ReplayRefused(Exception):
    """A request refused before it runs: `status` (413 too large, 422 bad input, 429 too many waiting) and
    a JSON-able `detail`."""

    def __init__(self, status: int, detail: dict[str, Any]) -> None:
        self.status, self.detail = status, detail
        super().__init__(detail.get("error", str(detail)))


def estimate_seconds(rows: int, policies: int) -> float:
    return round(rows * max(policies, 1) * SECONDS_PER_JOB, 1)


def run_replay(trace: str, policies: Sequence[tuple[str, str, str]], max_rows: int) -> dict[str, Any]:
    """Return {"result": the replay document} or {"error": ..., "problems": [...]} for a bad trace; run in a
    worker process (module level, its arguments plain text, so it pickles). `policies`: (text, source,
    default name) each."""
    try:
        named = [read_policy(text, source, default_name=name) for text, source, name in policies]
        doc = replay_document(lambda: io.StringIO(trace), named, trace_source="trace", max_rows=max_rows)
    except ReplayInputError as e:
        return {"error": f"{e.source}: cannot replay", "problems": e.problems}
    return {"result": doc}


@dataclass
class ReplayEntry:
    id: str
    rows: int
    policies: list[str]  # the policies' names, in the order given
    future: Future[dict[str, Any]] = field(repr=False)

    def status(self) -> str:
        f = self.future
        if not f.done():
            return "running" if f.running() else "queued"
        if f.cancelled() or f.exception() is not None or "error" in f.result():
            return "failed"
        return "done"

    def view(self) -> dict[str, Any]:
        """Return what `GET /api/v1/replays/{id}` answers: the status, and the result (or the error and its
        problems) once there is one; a part not there yet is null, never a missing key."""
        out: dict[str, Any] = {
            "id": self.id,
            "status": self.status(),
            "rows": self.rows,
            "policies": self.policies,
            "result": None,
            "error": None,
            "problems": [],
        }
        f = self.future
        if not f.done():
            return out
        if f.cancelled():
            out["error"] = "cancelled: the service stopped"
        elif (e := f.exception()) is not None:
            out["error"] = f"the replay failed: {type(e).__name__}: {e}"
        else:
            out.update(f.result())
        return out

    def result(self) -> dict[str, Any] | None:
        f = self.future
        if f.done() and not f.cancelled() and f.exception() is None:
            doc: dict[str, Any] | None = f.result().get("result")
            return doc
        return None


def _default_pool(workers: int) -> Executor:
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


class ReplayJobs:
    """Accepts replay requests, runs at most `cfg.workers` at once, keeps the last `cfg.keep`."""

    def __init__(self, cfg: ReplayConfig, *, pool: Callable[[int], Executor] = _default_pool) -> None:
        self.cfg = cfg
        self._make_pool = pool
        self._pool: Executor | None = None
        self._entries: OrderedDict[str, ReplayEntry] = OrderedDict()
        self._lock = threading.Lock()

    def submit(self, trace: str, policies: Sequence[str]) -> ReplayEntry:
        """Check the request and queue it; raise ReplayRefused (413, 422 or 429) with the reason."""
        rows = count_rows(trace)
        estimate = estimate_seconds(rows, len(policies))
        if rows > self.cfg.max_rows:
            raise ReplayRefused(
                413,
                {
                    "error": f"the trace has {rows:,} rows; this service replays at most {self.cfg.max_rows:,} "
                    "(replay.max_rows): replay a shorter span, or run `watchtower replay` on it",
                    "rows": rows,
                    "max_rows": self.cfg.max_rows,
                    "estimated_seconds": estimate,
                },
            )
        if not policies:
            raise ReplayRefused(422, {"error": "give at least one policy", "problems": ["policies: empty"]})
        if len(policies) > self.cfg.max_policies:
            raise ReplayRefused(
                422,
                {
                    "error": f"{len(policies)} policies; at most {self.cfg.max_policies} (replay.max_policies)",
                    "problems": [f"policies: more than {self.cfg.max_policies}"],
                },
            )
        specs = [(text, f"policies[{i}]", f"policy-{i + 1}") for i, text in enumerate(policies)]
        try:
            named = [read_policy(text, source, default_name=name) for text, source, name in specs]
            unique_names(named)
        except ReplayInputError as e:
            raise ReplayRefused(
                422, {"error": f"{e.source}: cannot replay", "problems": e.problems}
            ) from None
        with self._lock:
            waiting = sum(1 for e in self._entries.values() if not e.future.done())
            if waiting >= self.cfg.keep:
                raise ReplayRefused(
                    429, {"error": f"{waiting} replays are waiting or running; try again later"}
                )
            if self._pool is None:
                self._pool = self._make_pool(self.cfg.workers)
            future = self._pool.submit(run_replay, trace, specs, self.cfg.max_rows)
            entry = ReplayEntry(secrets.token_hex(8), rows, [p.policy.name for p in named], future)
            self._entries[entry.id] = entry
            self._prune()
        log.info(
            "replay %s queued: %d rows, %d policies, about %g s", entry.id, rows, len(policies), estimate
        )
        return entry

    def run_off_loop(self, call: Callable[[], T]) -> Future[T]:
        """Run `call` (it must pickle: a partial of a module-level function) in this pool, started if need be:
        the weekly report's what-if replays share the requests' workers rather than start their own."""
        with self._lock:
            if self._pool is None:
                self._pool = self._make_pool(self.cfg.workers)
            return self._pool.submit(call)

    def _prune(self) -> None:
        done = [k for k, e in self._entries.items() if e.future.done()]
        for k in done[: max(0, len(self._entries) - self.cfg.keep)]:
            del self._entries[k]

    def get(self, replay_id: str) -> ReplayEntry | None:
        with self._lock:
            return self._entries.get(replay_id)

    def close(self) -> None:
        """Stop: the queued replays are cancelled and a running one is ended, not waited for."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        # ProcessPoolExecutor has no public way (before Python 3.14) to end a worker mid-task: its
        # processes are terminated directly, else the interpreter's exit would wait for the replay.
        procs = getattr(pool, "_processes", None)
        processes = list(procs.values()) if isinstance(procs, dict) else []
        pool.shutdown(wait=False, cancel_futures=True)
        for p in processes:
            p.terminate()
