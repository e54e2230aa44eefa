"""A replica whose clock is two minutes ahead, against the real API server's Lease: two electors in one
process, the second given a clock 120 s fast through the composition root's seam (`Clock`). While the first
renews, the skewed one never takes the Lease (it judges expiry by how long it has seen the Lease unchanged,
by its own clock, not by comparing the holder's `renewTime` with its own); once the first stops renewing,
the skewed one takes over within a lease duration and a retry. Comparing clocks, it took the Lease at its
first try, from a leader renewing on time.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.e2e.controlplane.cluster import ControlPlane
from tests.e2e.failover import lease_of
from tests.e2e.identity import apply_rbac, token_kubeconfig
from tests.e2e.scenario import Scenario
from watchtower.adapters.clock import SystemClock
from watchtower.adapters.kube.connection import api_client
from watchtower.adapters.kube.lease import LeaseClient
from watchtower.domain.leader import JITTER, Timings
from watchtower.services.leadership import LeaderElector

pytestmark = pytest.mark.e2e

HOME = "e2e-skew-home"
TIMINGS = Timings(lease_duration=4, renew_deadline=3, retry_period=1)
SKEW = 120.0


class SkewedClock:
    def now(self) -> float:
        return time.time() + SKEW


def _elector(kubeconfig: Path, identity: str, clock: object) -> LeaderElector:
    client = api_client(kubeconfig=str(kubeconfig), context=None)
    lease = LeaseClient(client, name="watchtower", namespace=HOME, timeout=2.0)
    return LeaderElector(api=lease, identity=identity, timings=TIMINGS, clock=clock)  # type: ignore[arg-type]


def test_a_replica_two_minutes_ahead_never_takes_a_lease_that_is_renewed_and_takes_it_once_it_is_not(
    scenario: Scenario, control_plane: ControlPlane, tmp_path: Path
) -> None:
    s = scenario
    s.namespace(HOME)
    identity = apply_rbac(s.api, namespace=HOME, suffix="-e2e-skew")
    try:
        kube = token_kubeconfig(
            tmp_path / "skew.kubeconfig",
            server=control_plane.url,
            ca=control_plane.pki.ca_cert,
            token=identity.token(),
        )
        asyncio.run(_scenario(s, kube))
    finally:
        identity.remove()


async def _scenario(s: Scenario, kube: Path) -> None:
    on_time, ahead = _elector(kube, "on-time", SystemClock()), _elector(kube, "ahead", SkewedClock())
    assert await on_time.try_once() is not None and on_time.holds_now()
    leading = asyncio.create_task(on_time.run())
    following = asyncio.create_task(ahead.run())
    took: list[float] = []
    ahead.on_change = lambda now_leading: took.append(time.monotonic()) if now_leading else None
    try:
        await asyncio.sleep(3 * TIMINGS.lease_duration)  # three lease durations of renewals
        assert not took, "the replica whose clock runs ahead took a Lease renewed on time"
        lease = lease_of(s.api, HOME)
        assert (lease["holderIdentity"], lease["leaseTransitions"]) == ("on-time", 0)

        leading.cancel()  # the leader stops renewing (no release: as if it died)
        await asyncio.gather(leading, return_exceptions=True)
        stopped = time.monotonic()
        deadline = stopped + TIMINGS.lease_duration + 3 * TIMINGS.retry_period * (1 + JITTER)
        while not took:
            assert time.monotonic() < deadline, "the skewed replica never took the abandoned Lease"
            await asyncio.sleep(0.05)
        waited = took[0] - stopped
        print(
            f"\nclock {SKEW:g}s ahead: held off for {3 * TIMINGS.lease_duration:g}s, took over {waited:.1f}s after"
        )
        assert waited >= TIMINGS.lease_duration - TIMINGS.retry_period  # not before the Lease ran out
        assert lease_of(s.api, HOME)["holderIdentity"] == "ahead"
    finally:
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
        on_time.close()
        ahead.close()
