"""`watchtower run` finds its cluster as kubectl does, or says in one line what it tried and how to fix it.

The real command line runs as a subprocess with HOME and KUBECONFIG pointed at temporary directories.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.unit.adapters.kube.fake_apiserver import FakeApiServer

CLI = [sys.executable, "-m", "watchtower.cli"]
FIX = "set cluster.kubeconfig, KUBECONFIG, or run in a pod with a service account"
PODS = "/api/v1/pods"


def environment(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = str(home)
    env.update(extra)
    return env


def config(tmp_path: Path, cluster: str = "") -> Path:
    f = tmp_path / "watchtower.yaml"
    f.write_text(f"cluster:\n  source: kube\n{cluster}store:\n  path: {tmp_path / 'alerts.db'}\n")
    return f


def run(tmp_path: Path, env: dict[str, str], cluster: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "run", "--config", str(config(tmp_path, cluster)), "--port", "0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )


def dead_kubeconfig(path: Path, context: str = "dead") -> Path:
    """A kubeconfig for 127.0.0.1:1, where nothing listens."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": context, "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": context, "user": {"token": "t"}}],
                "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
                "current-context": context,
            }
        )
    )
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def test_no_configuration_anywhere_is_one_line_saying_what_was_tried_exit_2(
    tmp_path: Path, home: Path
) -> None:
    r = run(tmp_path, environment(home))
    assert r.returncode == 2
    assert r.stderr == (
        "watchtower: no Kubernetes API server to watch: tried cluster.kubeconfig (not set), "
        f"KUBECONFIG (not set), {home}/.kube/config (no such file), "
        "in-cluster service account (KUBERNETES_SERVICE_HOST not set: not in a pod); "
        f"{FIX}\n"
    )
    assert r.stdout == ""
    assert not (tmp_path / "alerts.db").exists()


def test_kubeconfig_variable_naming_no_file_replaces_the_home_one_as_for_kubectl(
    tmp_path: Path, home: Path
) -> None:
    dead_kubeconfig(home / ".kube" / "config")
    listed = f"{tmp_path}/a:{tmp_path}/b"
    r = run(tmp_path, environment(home, KUBECONFIG=listed, KUBERNETES_SERVICE_HOST="10.0.0.1"))
    assert r.returncode == 2
    assert r.stderr == (
        "watchtower: no Kubernetes API server to watch: tried cluster.kubeconfig (not set), "
        f"KUBECONFIG={listed} (no such file; ~/.kube/config is not read while it is set), "
        "in-cluster service account (no token at /var/run/secrets/kubernetes.io/serviceaccount/token: "
        f"automount disabled?); {FIX}\n"
    )


def test_a_missing_cluster_kubeconfig_is_one_line(tmp_path: Path, home: Path) -> None:
    r = run(tmp_path, environment(home), cluster=f"  kubeconfig: {tmp_path}/nope.yaml\n")
    assert (r.returncode, r.stderr) == (
        2,
        f"watchtower: cluster.kubeconfig {tmp_path}/nope.yaml does not exist: fix the path, or remove the key "
        "to use KUBECONFIG, ~/.kube/config or the pod's service account\n",
    )


def test_a_kubeconfig_that_is_not_yaml_is_one_line(tmp_path: Path, home: Path) -> None:
    (home / ".kube").mkdir()
    (home / ".kube" / "config").write_text("apiVersion: v1\nclusters: [\n  - a\n")
    r = run(tmp_path, environment(home))
    assert r.returncode == 2
    assert r.stderr.startswith(f"watchtower: kubeconfig {home}/.kube/config is not valid YAML: "), r.stderr
    assert r.stderr.count("\n") == 1 and "line 3" in r.stderr and "Traceback" not in r.stderr


def test_an_unknown_context_is_one_line_naming_the_contexts_there_are(tmp_path: Path, home: Path) -> None:
    kc = dead_kubeconfig(tmp_path / "kc.yaml", context="first")
    r = run(tmp_path, environment(home, KUBECONFIG=str(kc)), cluster="  context: nope\n")
    assert (r.returncode, r.stderr) == (
        2,
        f"watchtower: kubeconfig {kc} (KUBECONFIG) has no context 'nope' (cluster.context) (it has: first)\n",
    )


def serve_until_listed(tmp_path: Path, env: dict[str, str], server: FakeApiServer, cluster: str = "") -> str:
    """Run the service until `server` is asked for pods; return what it logged."""
    p = subprocess.Popen(
        [*CLI, "run", "--config", str(config(tmp_path, cluster)), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 30
        while not any(path == PODS for _, path, _ in server.requests):
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline, "the service never asked the fake API server for pods"
            time.sleep(0.05)
    finally:
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    assert "serving at http://127.0.0.1:" in out
    return err


@pytest.mark.parametrize("where", ["cluster.kubeconfig", "KUBECONFIG", "home"])
def test_the_first_configuration_in_kubectls_order_is_the_one_used(
    tmp_path: Path, home: Path, where: str
) -> None:
    server = FakeApiServer([PODS]).start()
    try:
        real = server.write_kubeconfig(tmp_path / "real.yaml")
        # Everything later in the order points where nothing listens.
        dead_kubeconfig(home / ".kube" / "config")
        env = environment(home, KUBERNETES_SERVICE_HOST="10.0.0.1")
        cluster = ""
        if where == "cluster.kubeconfig":
            cluster = f"  kubeconfig: {real}\n"
            env["KUBECONFIG"] = str(dead_kubeconfig(tmp_path / "dead.yaml"))
        elif where == "KUBECONFIG":
            env["KUBECONFIG"] = f"{tmp_path}/missing.yaml:{real}"  # the files that exist are merged
        else:
            real.replace(home / ".kube" / "config")
            real = home / ".kube" / "config"
        err = serve_until_listed(tmp_path, env, server, cluster)
        origin = {"cluster.kubeconfig": f"{real} (cluster.kubeconfig)", "KUBECONFIG": f"{real} (KUBECONFIG)"}
        assert f"Kubernetes API server {server.url}, from kubeconfig {origin.get(where, str(real))}" in err
        assert server.authorizations == {"Bearer test-token"}
    finally:
        server.stop()


@pytest.mark.parametrize("token", [None, "s3cret"])
def test_without_an_api_token_the_service_starts_and_says_changes_through_the_api_are_disabled(
    tmp_path: Path, home: Path, token: str | None
) -> None:
    # deploy/'s Secret is optional: a pod without it must start, and its log must say why a silence
    # cannot be created.
    server = FakeApiServer([PODS]).start()
    try:
        env = environment(home, KUBECONFIG=str(server.write_kubeconfig(tmp_path / "real.yaml")))
        env.pop("WATCHTOWER_SERVER__API_TOKEN", None)
        if token is not None:
            env["WATCHTOWER_SERVER__API_TOKEN"] = token
        err = serve_until_listed(tmp_path, env, server)
    finally:
        server.stop()
    disabled = "changes through the API (silences) are disabled: no server.api_token is configured"
    assert (disabled in err) is (token is None), err
    assert token is None or token not in err
