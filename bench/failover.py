"""Failover: two `watchtower run` replicas on a real control plane, the leader killed (SIGKILL) in the
middle of an alert storm, ten times over.

Each round makes a storm (--pods critical pods crossing their warning at once, one notification each, to
a signed receiver that takes --delay seconds per webhook), kills whichever replica leads once a quarter
of the storm is delivered, and starts it again as the new follower. Printed per round and in total: the
failover (the kill to the first notification from the new leader) beside its reference from the same
round, the kill to the moment the Lease ran out (what any Lease-based election must wait: the rest is
this loop's own delay); and notifications lost, duplicated under a new webhook-id, and re-delivered
under the same one (which a receiver drops).

Run: .venv/bin/python -m bench.failover [--rounds 10] [--pods 40] [--lease 15 10 2] [--delay 0.2]
(the control-plane binaries from tests/e2e/controlplane/build.sh, as the e2e tests use).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path

from tests.e2e.api import Api, ApiError, wait_for
from tests.e2e.controlplane.cluster import ControlPlane, binaries_dir
from tests.e2e.failover import ALERT, Audit, Replica, audit, lease_of, replica_config, storm
from tests.e2e.identity import apply_rbac, token_kubeconfig
from tests.e2e.scenario import PRIORITY_CLASSES
from tests.e2e.webhooks import Delivery, HookReceiver, new_secret

HOME = "bench-failover"


def _t(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def namespace(api: Api, name: str) -> str:
    api.create("/api/v1/namespaces", {"metadata": {"name": name, "labels": {"team": "oncall"}}})
    wait_for(
        f"ServiceAccount default in {name}",
        lambda: api.get(f"/api/v1/namespaces/{name}/serviceaccounts/default"),
    )
    return name


def one_round(
    i: int,
    api: Api,
    hooks: HookReceiver,
    replicas: list[Replica],
    config: Path,
    work: Path,
    *,
    pods: int,
    lease: tuple[float, float, float],
) -> tuple[float, float, Audit]:
    """Storm, kill the leader a quarter of the way through, wait for the storm to be delivered, start
    the killed one again as a follower; return the failover, the kill to the Lease running out, the audit."""
    ns = namespace(api, f"storm-{i}")
    expected = storm(api, ns, pods)

    def mine() -> list[Delivery]:
        return [d for d in hooks.received() if any(w[0] == ns for w in d.firing(ALERT))]

    wait_for("a quarter of the storm delivered", lambda: len(mine()) >= pods // 4, timeout=120)
    leader = next(r for r in replicas if r.leads())
    follower = next(r for r in replicas if r is not leader)
    killed = leader.kill()
    last = lease_of(api, HOME)
    expiry = _t(last["renewTime"]) + last["leaseDurationSeconds"]
    first = wait_for(
        "the new leader's first notification",
        lambda: next((d for d in hooks.received() if d.arrived > killed), None),
        timeout=lease[0] + 60,
    )
    wait_for("the whole storm delivered", lambda: audit(mine(), expected).delivered == pods, timeout=120)
    time.sleep(3)  # anything sent twice arrives within the group interval
    replicas.remove(leader)
    replicas.append(Replica(f"replica-{i + 2}", config, work).start())
    holder = follower.name + "_"
    wait_for(
        "the restarted replica following",
        lambda: (replicas[-1].leadership() or {}).get("holder", "").startswith(holder),
        timeout=60,
    )
    return first.arrived - killed, max(0.0, expiry - killed), audit(mine(), expected)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--pods", type=int, default=40)
    ap.add_argument(
        "--lease", type=float, nargs=3, default=(15.0, 10.0, 2.0), metavar=("DURATION", "DEADLINE", "RETRY")
    )
    ap.add_argument("--delay", type=float, default=0.2, help="seconds the receiver takes per webhook")
    a = ap.parse_args()
    lease = (a.lease[0], a.lease[1], a.lease[2])
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as d, contextlib.ExitStack() as stack:
        work = Path(d)
        t0 = time.monotonic()
        cp = ControlPlane(work / "controlplane", binaries_dir())
        (work / "controlplane").mkdir()
        cp.start()
        stack.callback(cp.stop)
        print(f"control plane up in {time.monotonic() - t0:.1f}s; load {os.getloadavg()[0]:.2f}")
        p = cp.pki
        api = Api(cp.url, ca=p.ca_cert, cert=(p.admin_cert, p.admin_key))
        stack.callback(api.close)
        for name, value, policy in PRIORITY_CLASSES:
            with contextlib.suppress(ApiError):
                api.create(
                    "/apis/scheduling.k8s.io/v1/priorityclasses",
                    {"metadata": {"name": name}, "value": value, "preemptionPolicy": policy},
                )
        namespace(api, HOME)
        identity = apply_rbac(api, namespace=HOME, suffix="-bench")
        hooks = HookReceiver(new_secret(), delay=a.delay).start()
        stack.callback(hooks.stop)
        kubeconfig = token_kubeconfig(
            work / "kubeconfig", server=cp.url, ca=p.ca_cert, token=identity.token()
        )
        config = replica_config(
            work / "replica.yaml",
            kubeconfig=kubeconfig,
            hook=hooks.url,
            secret=hooks.secret,
            store=work / "alerts.db",
            lease_namespace=HOME,
            lease=lease,
        )
        replicas = [Replica("replica-0", config, work).start()]
        stack.callback(lambda: [r.stop() for r in replicas])
        wait_for("a leader", replicas[0].leads, timeout=60)
        replicas.append(Replica("replica-1", config, work).start())
        wait_for(
            "a follower", lambda: (replicas[1].leadership() or {}).get("holder", "").startswith("replica-0_")
        )

        failovers, waits, lost, duplicated, redelivered = [], [], 0, 0, 0
        for i in range(a.rounds):
            failover, wait, r = one_round(i, api, hooks, replicas, config, work, pods=a.pods, lease=lease)
            failovers.append(failover)
            waits.append(wait)
            lost += len(r.lost)
            duplicated += r.duplicated
            redelivered += r.redelivered
            print(
                f"round {i + 1}: failover {failover:.2f}s (lease ran out {wait:.2f}s after the kill);"
                f" lost {len(r.lost)}, duplicated {r.duplicated}, re-delivered same id {r.redelivered};"
                f" load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
        print(
            f"\n{a.rounds} failovers, lease {lease[0]:g}s / renew deadline {lease[1]:g}s / retry {lease[2]:g}s,"
            f" {a.pods} notifications per storm at {a.delay:g}s each:"
        )
        print(
            f"  kill -> first notification from the new leader: median {statistics.median(failovers):.2f}s,"
            f" max {max(failovers):.2f}s"
        )
        print(
            f"  reference, kill -> the Lease ran out: median {statistics.median(waits):.2f}s, max {max(waits):.2f}s"
        )
        print(
            f"  notifications lost {lost}, duplicated {duplicated}, re-delivered under the same webhook-id {redelivered}"
        )
        print(f"  load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
