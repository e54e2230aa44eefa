"""A paddle-operator stand-in for status only: keeps each PaddleJob's `status` as the operator writes it
from the job's pods (phase, mode, per-role counts and refs). The scenarios create the pods themselves, so
that a job can be seen with none, some or all of them."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import httpx

from .api import Api, ApiError
from .workloads import PADDLE_API, paddle_status

log = logging.getLogger(__name__)
JOBS = f"/apis/{PADDLE_API}/paddlejobs"


@dataclass
class PaddleOperator:
    api: Api
    interval: float = 0.5
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="paddle-operator-stand-in", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
            except (httpx.TransportError, ApiError) as e:
                # The API server restarting (scenario 6), a namespace going away, a write conflict: the
                # next pass reads again, as the operator's requeue would.
                log.debug("paddle-operator stand-in: %r", e)
            except Exception as e:  # keep it alive; the scenarios' own waits report what is missing
                self.errors.append(repr(e))
                log.warning("paddle-operator stand-in: %r", e)
            self._stop.wait(self.interval)

    def sync(self) -> None:
        """One reconcile pass over every PaddleJob: write the status its pods give, where it changed."""
        jobs = self.api.items(JOBS)
        if not jobs:
            return
        pods_of: dict[str, list[dict[str, Any]]] = {}
        for p in self.api.items("/api/v1/pods"):
            for ref in p["metadata"].get("ownerReferences") or []:
                if ref.get("controller") and ref.get("kind") == "PaddleJob":
                    pods_of.setdefault(ref["uid"], []).append(p)
        for job in jobs:
            meta = job["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            status = paddle_status(job, pods_of.get(meta["uid"], []))
            if status == job.get("status"):
                continue
            job["status"] = status
            self.api.request(
                "PUT",
                f"/apis/{PADDLE_API}/namespaces/{meta['namespace']}/paddlejobs/{meta['name']}/status",
                body=job,
            )
