"""A paddle-operator stand-in for status only: keeps each PaddleJob's `status` as the operator writes it
from the job's pods (phase, mode, per-role counts and refs). The scenarios create the pods themselves, so
that a job can be seen with none, some or all of them."""

from __future__ import annotations

import logging
from typing import Any

import httpx

from tests.e2e.api import Api, ApiError
from tests.e2e.standin import StandIn
from tests.e2e.workloads import PADDLE_API, paddle_status

log = logging.getLogger(__name__)
JOBS = f"/apis/{PADDLE_API}/paddlejobs"


class PaddleOperator(StandIn):
    name = "paddle-operator-stand-in"

    def __init__(self, api: Api) -> None:
        super().__init__()
        self.api = api

    def run_once(self) -> None:
        self.sync()

    def passing(self, e: Exception) -> bool:
        # The API server restarting (scenario 6), a namespace going away, a write conflict: the next pass
        # reads again, as the operator's requeue would.
        if isinstance(e, httpx.TransportError | ApiError):
            log.debug("%s: %r", self.name, e)
            return True
        return False

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
