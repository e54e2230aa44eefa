"""Two `watchtower run` replicas against the real API server, electing a leader on a real Lease with
deploy/base/rbac.yaml's token: only the leader notifies; killed (SIGKILL) in the middle of an alert storm, the
follower takes over once the lease has run out and finishes the storm, nothing lost and nothing said twice
beyond what the webhook-id lets a receiver drop; stopped by SIGTERM, the leader finishes, hands the Lease
back and the follower takes over at once.

The machinery (replicas, the audit) is in failover.py and the slow signed receiver in webhooks.py, shared with
bench/failover.py, which repeats the kill ten times and prints the figures.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tests.e2e.api import wait_for
from tests.e2e.controlplane.cluster import ControlPlane
from tests.e2e.failover import Replica, audit, lease_of, replica_config, storm
from tests.e2e.identity import apply_rbac, token_kubeconfig
from tests.e2e.scenario import Scenario
from tests.e2e.webhooks import HookReceiver, new_secret
from watchtower.domain.leader import JITTER

pytestmark = pytest.mark.e2e

HOME, STORM = "e2e-lead-home", "e2e-lead-storm"  # + each test's suffix: a deleted namespace lingers
PODS = 40
# Short enough for a test; the bench runs client-go's defaults. (lease, renew deadline, retry)
QUICK = (6.0, 4.0, 1.0)
DEFAULTS = (15.0, 10.0, 2.0)


def _t(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


@contextlib.contextmanager
def two_replicas(
    s: Scenario, control_plane: ControlPlane, *, lease: tuple[float, float, float], suffix: str
) -> Iterator[tuple[Replica, Replica, HookReceiver, str]]:
    """Start replica-a (which leads) then replica-b (which follows) on one store; yield them, the
    receiver and the storm's namespace. Afterwards: the API server never refused them."""
    home = s.namespace(HOME + suffix)
    ns = s.namespace(STORM + suffix, team="oncall")
    with contextlib.ExitStack() as stack:
        identity = apply_rbac(s.api, namespace=home, suffix=suffix)
        stack.callback(identity.remove)
        hooks = HookReceiver(new_secret(), delay=0.2).start()
        stack.callback(hooks.stop)
        kubeconfig = token_kubeconfig(
            s.workdir / "watchtower.kubeconfig",
            server=control_plane.url,
            ca=control_plane.pki.ca_cert,
            token=identity.token(),
        )
        config = replica_config(
            s.workdir / "replica.yaml",
            kubeconfig=kubeconfig,
            hook=hooks.url,
            secret=hooks.secret,
            store=s.workdir / "alerts.db",
            lease_namespace=home,
            lease=lease,
        )
        a = Replica("replica-a", config, s.workdir).start()
        stack.callback(a.stop)
        wait_for("replica-a leading", a.leads, timeout=30)
        b = Replica("replica-b", config, s.workdir).start()
        stack.callback(b.stop)

        def follows() -> bool:
            st = b.leadership()
            return st is not None and st["role"] == "follower" and st["holder"].startswith("replica-a_")

        wait_for("replica-b following replica-a", follows, timeout=30)
        yield a, b, hooks, ns
        for r in (a, b):
            err = Path(r.workdir / f"{r.name}.err").read_text(errors="replace")
            assert not re.search(r"HTTP 403|[Ff]orbidden", err), r.log()


def test_a_killed_leaders_storm_is_finished_by_the_follower_once_the_lease_ran_out_nothing_lost_or_repeated(
    scenario: Scenario, control_plane: ControlPlane
) -> None:
    duration, _, retry = QUICK
    with two_replicas(scenario, control_plane, lease=QUICK, suffix="-1") as (a, b, hooks, ns):
        held = lease_of(scenario.api, HOME + "-1")
        assert held["holderIdentity"].startswith("replica-a_") and held["leaseDurationSeconds"] == duration
        expected = storm(scenario.api, ns, PODS)
        # 40 notifications at 0.2 s each: the leader is killed a quarter of the way through.
        wait_for("the storm under way at the receiver", lambda: len(hooks.received()) >= 10, timeout=60)
        killed = a.kill()
        time.sleep(0.5)  # a renewal already on the wire lands
        last = lease_of(scenario.api, HOME + "-1")  # replica-a's last renewal: it renews no more
        sent_by_a = [d for d in hooks.received() if d.arrived <= killed]
        assert len(sent_by_a) < PODS, "the storm was over before the kill: nothing to take over"

        wait_for("replica-b leading", b.leads, timeout=duration + 10)
        taken = lease_of(scenario.api, HOME + "-1")
        assert taken["holderIdentity"].startswith("replica-b_")
        assert taken["leaseTransitions"] == last["leaseTransitions"] + 1
        # It waited for the lease to run out (replica-a might only have been slow), and not much longer:
        # one jittered retry period, plus a second for a loaded machine.
        waited = _t(taken["acquireTime"]) - _t(last["renewTime"])
        assert duration <= waited <= duration + retry * (1 + JITTER) + 1.0, waited

        def all_notified() -> bool:
            return audit(hooks.received(), expected).delivered == PODS

        wait_for("every storm workload notified", all_notified, timeout=60)
        time.sleep(3)  # anything sent twice would have arrived by now (group_interval 2 s)
        result = audit(hooks.received(), expected)
        after = [d for d in hooks.received() if d.arrived > killed]
        assert after, "the new leader sent nothing"
        failover = after[0].arrived - killed
        assert failover <= duration + retry * (1 + JITTER) + 2.0, failover
        assert result.lost == []
        assert result.duplicated == 0, "a notification said twice under different webhook-ids"
        assert result.unsigned == 0
        # At most the one send under way at the kill goes again, under its webhook-id.
        assert result.redelivered <= 1

        rc, took = b.terminate(timeout=30)
        assert rc == 0, b.log()
        assert took <= 15, took
        assert lease_of(scenario.api, HOME + "-1")["holderIdentity"] == "", "the Lease was not handed back"


def test_a_leader_stopped_by_sigterm_finishes_hands_the_lease_back_and_the_follower_takes_over_at_once(
    scenario: Scenario, control_plane: ControlPlane
) -> None:
    duration, _, retry = DEFAULTS
    with two_replicas(scenario, control_plane, lease=DEFAULTS, suffix="-2") as (a, b, hooks, ns):
        expected = storm(scenario.api, ns, PODS)
        wait_for("the storm under way at the receiver", lambda: len(hooks.received()) >= 10, timeout=60)
        rc, took = a.terminate(timeout=30)
        stopped = time.time()
        assert rc == 0, a.log()
        assert took <= 15, f"SIGTERM to exit took {took:.1f}s:\n{a.log()}"
        released = lease_of(scenario.api, HOME + "-2")
        assert released["holderIdentity"] in ("",) or released["holderIdentity"].startswith("replica-b_")

        wait_for("replica-b leading", b.leads, timeout=duration)
        # The Lease was released: no waiting for it to run out.
        taken = lease_of(scenario.api, HOME + "-2")
        assert _t(taken["acquireTime"]) - stopped <= retry * (1 + JITTER) + 1.0

        wait_for(
            "every storm workload notified",
            lambda: audit(hooks.received(), expected).delivered == PODS,
            timeout=60,
        )
        time.sleep(3)
        result = audit(hooks.received(), expected)
        assert result.lost == [] and result.duplicated == 0 and result.unsigned == 0
        # A stopping leader finishes its sends under way: nothing is sent again.
        assert result.redelivered == 0
        assert "left in the outbox" not in a.log()
