"""`watchtower analyze` and the simulator read objects with the decoder alone: the client library stays unloaded."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_the_decoder_and_analyze_load_without_the_kubernetes_client() -> None:
    code = (
        "import sys, watchtower.adapters.kube.decoder, watchtower.services.analyze;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kubernetes', 'urllib3')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_adapter_names_are_there_when_asked_for() -> None:
    from watchtower.adapters import kube
    from watchtower.adapters.kube import connection, health, resources, source

    # Each name the package offers is the object its module defines (not a copy or a stand-in), and a name it
    # does not offer fails as a plain Python import would, naming what was asked for.
    assert kube.KubeSource is source.KubeSource
    assert kube.RESOURCES is resources.RESOURCES and kube.Resource is resources.Resource
    assert kube.KindHealth is health.KindHealth
    assert kube.api_client is connection.api_client and kube.Transport is connection.Transport
    assert all(getattr(kube, name) is not None for name in kube.__all__)
    with pytest.raises(AttributeError, match="KubeSorce"):
        _ = kube.KubeSorce
    assert {r.kind for r in kube.RESOURCES} >= {"Pod", "Event"}
