"""Fixtures every test directory may use (the alert store on each supported database, tests/fixtures/stores.py),
and the `gobuilt` mark on the tests that run a binary built from a Go module (tests/setup/build-go.sh): `make
test` runs the others while those builds are still going, then these once the builds are done
(tests/setup/run-tests.sh)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.stores import postgres_server, store_backend

HERE = Path(__file__).parent

__all__ = ["postgres_server", "store_backend"]

# Fixtures that hand a test a Go-built binary: promtool 3 (beside Debian's), a current amtool/Alertmanager,
# Alertmanager's webhook types as a program, kustomize and helm. A test that takes one before its build is done
# errors on a cold machine (the caches of a warm one hide it).
GO_FIXTURES = frozenset({"promtool", "amtool", "flavour", "webhookcheck", "kustomize", "helm"})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    e2e = HERE / "e2e"
    for item in items:
        path = Path(str(item.fspath))
        if e2e in path.parents or GO_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.gobuilt)
        if "scenario" in getattr(item, "fixturenames", ()):
            # Not rerun (run-tests.sh reruns a failed test once): a scenario's namespaces stay Terminating on
            # a control plane with no namespace controller, so a rerun could only fail on its first
            # namespace ("object is being deleted") and the log would show that instead of the real failure.
            item.add_marker(pytest.mark.flaky(reruns=0))
