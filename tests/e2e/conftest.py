"""The real control plane for the end-to-end scenarios: one per session, started on first use.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler run as child processes on loopback with
their logs in a temporary directory (tails printed when start-up fails); a kubelet stand-in thread plays
the nodes. Every test gets a `Scenario`: its own namespaces and nodes, removed afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import crds
from tests.e2e.api import Api, ApiError
from tests.e2e.controlplane.cluster import ControlPlane, binaries_dir
from tests.e2e.kubelet import Kubelet
from tests.e2e.kueue.manager import KueueManager, binary
from tests.e2e.operator import PaddleOperator
from tests.e2e.scenario import PRIORITY_CLASSES, Scenario


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    bin_dir = binaries_dir()
    cp = ControlPlane(tmp_path_factory.mktemp("controlplane"), bin_dir)
    cp.start()
    print(f"\ncontrol plane up in {cp.startup_seconds:.1f}s; logs in {cp.workdir}")
    try:
        yield cp
    finally:
        cp.stop()
        peaks = ", ".join(f"{n} {mib:.0f} MiB" for n, mib in cp.peak_rss.items())
        print(f"\ncontrol plane peak memory: {peaks}")


@pytest.fixture(scope="session")
def admin(control_plane: ControlPlane) -> Iterator[Api]:
    p = control_plane.pki
    api = Api(control_plane.url, ca=p.ca_cert, cert=(p.admin_cert, p.admin_key))
    for name, value, policy in PRIORITY_CLASSES:
        try:
            api.create(
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                {"metadata": {"name": name}, "value": value, "preemptionPolicy": policy},
            )
        except ApiError as e:
            if e.status != 409:
                raise
    # paddle-operator's PaddleJob and Volcano's PodGroup and Queue, as upstream ships them.
    crds.install(api)
    yield api
    api.close()


@pytest.fixture(scope="session")
def kubelet(admin: Api) -> Iterator[Kubelet]:
    k = Kubelet(admin)
    k.start()
    yield k
    k.stop()
    assert not k.errors, f"kubelet stand-in errors: {k.errors[:5]}"


@pytest.fixture(scope="session")
def kueue(admin: Api, control_plane: ControlPlane) -> Iterator[KueueManager]:
    """Kueue v0.17.0's real controller manager, with its CRDs: started by the first test that asks for it."""
    t0 = time.monotonic()
    crds.install(admin, crds.KUEUE_CRDS)
    served = time.monotonic() - t0
    manager = KueueManager(control_plane.workdir / "kueue", binary(), control_plane)
    manager.start(admin)
    print(
        f"\nKueue CRDs served in {served:.1f}s; kueue ready in {manager.startup_seconds:.1f}s, its visibility"
        f" API in {manager.visibility_seconds:.1f}s; log {manager.log}"
    )
    try:
        yield manager
    finally:
        manager.stop()
        if manager.peak_rss_mib is not None:
            print(f"\nkueue peak memory: {manager.peak_rss_mib:.0f} MiB")


@pytest.fixture(scope="session")
def paddle_operator(admin: Api) -> Iterator[PaddleOperator]:
    op = PaddleOperator(admin)
    op.start()
    yield op
    op.stop()
    assert not op.errors, f"paddle-operator stand-in errors: {op.errors[:5]}"


@pytest.fixture
def scenario(
    admin: Api,
    kubelet: Kubelet,
    paddle_operator: PaddleOperator,
    tmp_path: Path,
    control_plane: ControlPlane,
) -> Iterator[Scenario]:
    s = Scenario(admin, kubelet, tmp_path)
    try:
        yield s
    finally:
        try:
            s.cleanup()
        finally:
            kubelet.terminate_seconds = 1.0
