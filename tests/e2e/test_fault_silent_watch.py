"""A watch that stays open and carries nothing: `watchtower run` reaches the real API server through the fault
proxy (tests/faults/proxy.py), which then stalls every open connection (no event, no bookmark, no end) while
new ones still pass. The service must take the silent watches for dead within its silence deadline
(`min(90 s, watch_timeout + 10 s)`; 20 s here with `watch_timeout: 10s`), watch again from where it was, and
report the pod made during the silence; /readyz and the status page then say how long the picture was stale.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml

from tests.e2e.api import wait_for
from tests.e2e.controlplane.cluster import ControlPlane, tail
from tests.e2e.identity import apply_rbac, token_kubeconfig
from tests.e2e.scenario import Scenario
from tests.e2e.test_service_api import running_service, service_config
from tests.faults.proxy import FaultProxy

pytestmark = pytest.mark.e2e

HOME = "e2e-silent-home"
WATCH_TIMEOUT = 10.0
DEADLINE = WATCH_TIMEOUT + 10.0  # KubeSource.silence_deadline() with these settings


def test_a_silent_watch_is_noticed_within_its_deadline_and_nothing_made_meanwhile_is_missed(
    scenario: Scenario, control_plane: ControlPlane
) -> None:
    s = scenario
    s.namespace(HOME)
    ns = s.namespace("e2e-silent", team="vision")
    identity = apply_rbac(s.api, namespace=HOME, suffix="-e2e-silent")
    proxy = FaultProxy(int(urlsplit(control_plane.url).port or 443)).start()
    try:
        kubeconfig = token_kubeconfig(
            s.workdir / "silent.kubeconfig",
            server=f"https://127.0.0.1:{proxy.port}",  # the API server's certificate names 127.0.0.1
            ca=control_plane.pki.ca_cert,
            token=identity.token(),
        )
        config = service_config(
            s.workdir / "silent.yaml",
            kubeconfig=kubeconfig,
            hook="http://127.0.0.1:9/unused",
            secret="whsec_" + "A" * 32,
            store=s.workdir / "silent.db",
        )
        doc = yaml.safe_load(config.read_text())
        doc["cluster"]["watch_timeout"] = f"{WATCH_TIMEOUT:g}s"
        config.write_text(yaml.safe_dump(doc, sort_keys=False))
        with running_service(config, s.workdir) as (url, proc), httpx.Client(base_url=url, timeout=10) as web:
            _scenario(s, web, proxy, ns)
        assert proc.returncode == 0, (
            f"watchtower run did not stop cleanly:\n{tail(s.workdir / 'service.err')}"
        )
    finally:
        proxy.stop()
        identity.remove()


def _waiting(web: httpx.Client, ns: str, name: str) -> bool:
    doc = web.get("/api/v1/queue", params={"namespace": ns}).json()
    return any(w["name"] == name for w in doc["workloads"])


def _scenario(s: Scenario, web: httpx.Client, proxy: FaultProxy, ns: str) -> None:
    wait_for("/readyz 200", lambda: web.get("/readyz").status_code == 200, timeout=90)
    # Too big for any node: it waits for as long as the test runs.
    s.gang(ns, "before", workers=1, gpus=64, priority_class="batch")
    wait_for("the first workload in the queue", lambda: _waiting(web, ns, "before"), timeout=30)

    proxy.blackhole(new=False)  # every open watch now carries nothing; reconnecting works
    silenced = time.monotonic()
    s.gang(ns, "during", workers=1, gpus=64, priority_class="batch")
    wait_for(
        "the workload made during the silence", lambda: _waiting(web, ns, "during"), timeout=3 * DEADLINE
    )
    noticed = time.monotonic() - silenced
    print(f"\nsilent watch: the pod made during the silence reported {noticed:.1f}s after it began")
    # The deadline and a tick; the read timeout before the deadline was watch_timeout + 30 s (40 s here).
    assert noticed <= DEADLINE + 8

    ready = web.get("/readyz")
    assert ready.status_code == 200, ready.text
    pods: dict[str, Any] = ready.json()["kinds"]["Pod"]["source"]
    assert "carried nothing" in pods["last_outage_error"], pods
    assert DEADLINE - 1 <= pods["last_outage_seconds"] <= noticed + WATCH_TIMEOUT, pods
    assert pods["relists"] == 0, "resumed from its resourceVersion, not listed again"
    page = web.get("/").text
    assert "was stale for" in page and "carried nothing" in page
    assert proxy.accepted > 1
