"""The simulator package's builders import alone (no cycle anywhere in watchtower: tests/architecture)."""

from __future__ import annotations

import subprocess
import sys


def test_the_object_builders_import_without_the_cluster_or_the_demo():
    code = (
        "import sys, watchtower.simulator.objects, watchtower.simulator.workloads;"
        "print([m for m in sys.modules if m.endswith(('.cluster', '.story', '.warm')) or '.commands' in m])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
