"""`watchtower analyze` and the simulator read objects with the decoder alone: the client library stays unloaded."""

from __future__ import annotations

import subprocess
import sys


def test_the_decoder_and_analyze_load_without_the_kubernetes_client() -> None:
    code = (
        "import sys, watchtower.adapters.kube.decoder, watchtower.services.analyze;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kubernetes', 'urllib3')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_adapter_names_are_there_when_asked_for() -> None:
    from watchtower.adapters import kube

    assert kube.KubeSource.__name__ == "KubeSource"
    assert {r.kind for r in kube.RESOURCES} >= {"Pod", "Event"}
