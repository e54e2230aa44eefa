"""How long `watchtower demo` takes to offer its simulated past week's fairness report: from the call that
starts the demo to its "its fairness report is ready" line, with the live demo running beside it, as
`make demo` runs it: with its Prometheus (the past week's metrics backfilled into it: sampled every 5
simulated minutes, promtool, a restart), then without (no backfill). The reference, measured in the same
run after the demos have stopped: the bare simulator stepping the same week in the same 2-minute steps,
nothing recorded.

    PYTHONPATH=$PWD .venv/bin/python bench/demo_past_week.py [--no-prometheus] [--no-reference]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import time
import zoneinfo

from watchtower.commands.demo.past_week import STEP, past_week_of
from watchtower.commands.demo.run import DemoOptions, run_demo
from watchtower.commands.demo.warm import demo_cluster
from watchtower.config.model import Settings


async def offered(prometheus: bool) -> tuple[float, list[str]]:
    lines: list[str] = []
    ready = asyncio.Event()
    t0 = time.perf_counter()

    def echo(line: str) -> None:
        lines.append(f"{time.perf_counter() - t0:7.2f} s  {line}")
        if "fairness report is ready" in line:
            ready.set()

    demo = asyncio.create_task(run_demo(DemoOptions(prometheus=prometheus), echo=echo))
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({demo, waiter}, return_when=asyncio.FIRST_COMPLETED)
    took = time.perf_counter() - t0
    demo.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await demo
    if not ready.is_set():
        raise SystemExit("the demo ended before its past week was recorded:\n" + "\n".join(lines))
    return took, lines


def bare_week() -> float:
    settings = Settings()
    cfg = settings.simulator
    sim = demo_cluster(cfg.model_copy(update={"seed": cfg.seed + 1, "metrics_port": 0}))
    week = past_week_of(settings, sim.now())
    start, end = week.bounds(zoneinfo.ZoneInfo(settings.fairness.timezone))
    t0 = time.perf_counter()
    sim = demo_cluster(cfg.model_copy(update={"seed": cfg.seed + 1, "metrics_port": 0}), start=start)
    while sim.now() < end:
        sim.step(min(STEP, end - sim.now()))
        sim.drain()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-prometheus", action="store_true")
    ap.add_argument("--no-reference", action="store_true")
    args = ap.parse_args()
    for prometheus in (False,) if args.no_prometheus else (True, False):
        load_before = os.getloadavg()
        took, lines = asyncio.run(offered(prometheus))
        print("\n".join(lines))
        what = "with Prometheus, metrics backfilled" if prometheus else "without Prometheus, no backfill"
        print(
            f"start -> past week's report offered, {what}: {took:.1f} s "
            f"(load {load_before[0]:.2f} -> {os.getloadavg()[0]:.2f})"
        )
    if not args.no_reference:
        ref = bare_week()
        print(
            f"reference, the bare simulator through the same week: {ref:.1f} s (load {os.getloadavg()[0]:.2f})"
        )


if __name__ == "__main__":
    main()
