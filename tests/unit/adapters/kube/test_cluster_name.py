"""The cluster's default name, from the configuration the client loads (no API server is reached), and the
root's choice between it and `cluster.name`, said once in the log."""

from __future__ import annotations

import logging

import yaml
from kubernetes import client as k8s

from watchtower.adapters.kube.connection import _named, named_client
from watchtower.config.model import Settings
from watchtower.runtime.cluster_name import named_cluster


def _kubeconfig(path, current: str = "admin@prod") -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "prod-eu-1", "cluster": {"server": "https://10.1.0.1:6443"}},
            {"name": "staging", "cluster": {"server": "https://10.2.0.1:6443"}},
        ],
        "users": [{"name": "admin", "user": {"token": "t"}}],
        "contexts": [
            {"name": "admin@prod", "context": {"cluster": "prod-eu-1", "user": "admin"}},
            {"name": "admin@staging", "context": {"cluster": "staging", "user": "admin"}},
        ],
        "current-context": current,
    }
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_outside_a_cluster_the_name_is_the_current_contexts_cluster(tmp_path):
    _, name = named_client(kubeconfig=_kubeconfig(tmp_path / "config"), context=None)
    assert name.name == "prod-eu-1"
    assert "kubeconfig context's cluster" in name.origin and "cluster.kubeconfig" in name.origin


def test_a_chosen_context_gives_its_own_cluster(tmp_path):
    _, name = named_client(kubeconfig=_kubeconfig(tmp_path / "config"), context="admin@staging")
    assert name.name == "staging"


def test_in_a_pod_the_name_is_the_api_servers_host():
    cfg = k8s.Configuration()
    cfg.host = "https://10.96.0.1:443"
    name = _named(cfg, None, None, "the pod's service account")
    assert (name.name, name.origin) == ("10.96.0.1", "the API server's host (the pod's service account)")


def test_the_root_keeps_a_configured_name_and_says_where_the_name_came_from(caplog):
    caplog.set_level(logging.INFO, logger="watchtower")
    chosen = named_cluster(Settings(), "demo", "the simulator")
    assert chosen.cluster.name == "demo"
    configured = Settings.model_validate({"cluster": {"name": "prod"}})
    assert named_cluster(configured, "demo", "the simulator").cluster.name == "prod"
    said = [r.getMessage() for r in caplog.records if r.name == "watchtower"]
    assert said == [
        "cluster name 'demo', from the simulator (set cluster.name to choose)",
        "cluster name 'prod', from cluster.name",
    ]
