"""The demo's timeline, as the README's Demo section tells it, on the real composition: the simulator, the
service, the SMTP and webhook sinks and (when installed) the real Prometheus, sampled through the HTTP API as a
user would. Run at twice the demo's speed so that its two minutes take one."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from watchtower.commands.demo.run import DemoOptions, DemoRun, run_demo

SPEED = 120.0  # simulated seconds per real second: `make demo` runs at 60
DEADLINE = 110.0  # real seconds: the README promises all of it within two simulated hours (60 s here)
TIERS = {"critical", "high", "medium", "low"}


@contextlib.asynccontextmanager
async def _demo(opts: DemoOptions) -> AsyncIterator[DemoRun]:
    ready: asyncio.Future[DemoRun] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(run_demo(opts, echo=lambda _: None, on_ready=ready.set_result))
    try:
        done, _ = await asyncio.wait({task, ready}, timeout=120, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            task.result()
        assert ready.done(), "the demo did not start within 120 s"
        yield ready.result()
    finally:
        task.cancel()
        await asyncio.wait({task}, timeout=60)
        with contextlib.suppress(asyncio.CancelledError):
            task.result()


class Seen:
    """What a user sampling the API has seen so far."""

    def __init__(self, want_idle: bool) -> None:
        self.want_idle = want_idle
        self.tiers: set[str] = set()
        self.medium_over_warning: dict[str, str] = {}  # namespace/name → kind, past 30 min and waiting
        self.quota_blocked: list[dict[str, Any]] = []
        self.partial_gangs: list[dict[str, Any]] = []
        self.preemptions: list[dict[str, Any]] = []
        self.idle: list[dict[str, Any]] = []
        self.mail: list[str] = []
        self.hooks: list[str] = []

    def missing(self) -> list[str]:
        out = [f"{t} tier waiting" for t in sorted(TIERS - self.tiers)]
        checks = {
            "a medium workload past its warning": self.medium_over_warning,
            "its WorkloadWaitWarning by email": self.mail,
            "its WorkloadWaitWarning by webhook": self.hooks,
            "a quota-blocked workload": self.quota_blocked,
            "a partial gang": self.partial_gangs,
            "a preemption with victim, preemptor and GPU-hours": self.preemptions,
        }
        if self.want_idle:
            checks["idle GPUs"] = self.idle
        return out + [what for what, got in checks.items() if not got]


async def _sample(c: httpx.AsyncClient, run: DemoRun, seen: Seen) -> None:
    body = (await c.get("/api/v1/queue", params={"limit": 5000})).json()
    for w in body["workloads"]:
        seen.tiers.add(w["tier"])
        key = f"{w['namespace']}/{w['name']}"
        if w["tier"] == "medium" and w["state"] in ("pending", "partial") and w["severity"]:
            seen.medium_over_warning[key] = w["namespace"]
        if w["state"] == "quota_blocked":
            seen.quota_blocked.append(w)
        if w["state"] == "partial" and w["gang"]:
            seen.partial_gangs.append(w)
    pre = (await c.get("/api/v1/preemptions")).json()["preemptions"]
    seen.preemptions += [
        p
        for p in pre
        if p["victim_name"] and (p["preemptor_name"] or p["preemptor_uid"]) and p["gpu_hours_lost"]
    ]
    if seen.want_idle:
        r = await c.get("/api/v1/gpu/idle")
        if r.status_code == 200:
            seen.idle += r.json()["idle_workloads"]
    for key, ns in seen.medium_over_warning.items():
        seen.hooks += [
            key
            for h in run.webhooks.webhooks()
            if h.verified and key in h.workloads and "WorkloadWaitWarning" in h.alertnames
        ]
        seen.mail += [
            e.subject for e in run.smtp.emails() if "WorkloadWaitWarning" in e.subject and ns in e.subject
        ]


async def test_within_two_simulated_hours_the_demo_shows_every_moment_the_readme_promises() -> None:
    with_prom = shutil.which("prometheus") is not None
    async with _demo(DemoOptions(speed=SPEED, prometheus=with_prom)) as run:
        seen = Seen(want_idle=with_prom)
        start = time.monotonic()
        async with httpx.AsyncClient(base_url=run.url, timeout=10) as c:
            while seen.missing() and time.monotonic() - start < DEADLINE:
                await _sample(c, run, seen)
                await asyncio.sleep(1.0)
        assert not seen.missing(), f"after {time.monotonic() - start:.0f} s: {seen.missing()}"
        p = seen.preemptions[0]
        assert p["victim_tier"] and p["node"] and p["gpus"]
