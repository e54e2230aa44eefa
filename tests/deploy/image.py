"""Watchtower's OCI image, built by deploy/image/build.sh, run the way a container runtime would.

runc (Debian's) runs the image's own bundle (`umoci unpack`: the runtime configuration made from the image's
config, and the root filesystem of its layer) with a read-only root, the image's user and a tmpfs where the
Deployment mounts volumes. Where runc cannot run (no namespaces, a cgroup layout it refuses), the same root
filesystem runs in a chroot as user 65532: `runtime()` says which, and the tests print it. crun 1.8 (Debian
12) refuses this machine's hybrid cgroup layout ("cgroups in hybrid mode not supported"); runc works here.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[2]
BUILD = ROOT / "deploy" / "image" / "build.sh"


def version() -> str:
    for line in (ROOT / "pyproject.toml").read_text().splitlines():
        if line.startswith("version = "):
            return line.split('"')[1]
    raise AssertionError("no version in pyproject.toml")


def build() -> Path:
    """Return the directory build.sh made (cached by the sources' hash); fail with its log otherwise."""
    r = subprocess.run([str(BUILD)], capture_output=True, text=True, check=False, timeout=1800)
    if r.returncode != 0:
        raise AssertionError(f"deploy/image/build.sh failed (rc={r.returncode}):\n{r.stderr[-4000:]}")
    return Path(r.stdout.strip().splitlines()[-1])


def image_config(layout: Path, tag: str) -> dict[str, Any]:
    """Return the image's configuration blob (user, entrypoint, cmd, env), read from the OCI layout."""
    index = json.loads((layout / "index.json").read_text())
    (desc,) = [
        m
        for m in index["manifests"]
        if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag
    ]
    manifest = json.loads(_blob(layout, desc["digest"]).read_text())
    return {"manifest": manifest, **json.loads(_blob(layout, manifest["config"]["digest"]).read_text())}


def _blob(layout: Path, digest: str) -> Path:
    algo, hexd = digest.split(":", 1)
    return layout / "blobs" / algo / hexd


@dataclass
class Unpacked:
    """The image unpacked once: its runtime configuration template and its root filesystem."""

    bundle: Path

    @property
    def rootfs(self) -> Path:
        return self.bundle / "rootfs"

    def template(self) -> dict[str, Any]:
        return json.loads((self.bundle / "config.json").read_text())


def unpack(layout: Path, tag: str, into: Path) -> Unpacked:
    subprocess.run(
        ["umoci", "unpack", "--image", f"{layout}:{tag}", str(into)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return Unpacked(into)


def runtime(unpacked: Unpacked, scratch: Path) -> str:
    """Return "runc" when runc runs the image here, else "chroot"."""
    if shutil.which("runc") is None:
        return "chroot"
    try:
        r = Runner(unpacked, scratch, "runc").run(["/usr/bin/true"], timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return "chroot"
    return "runc" if r.returncode == 0 else "chroot"


class Runner:
    """Runs a command in the image: the image's user, a read-only root, `/etc/watchtower` from `config_dir`
    (read-only) and tmpfs at /tmp and /var/lib/watchtower, as deploy/ mounts them; the host's network (the
    tests reach the service on 127.0.0.1)."""

    def __init__(
        self, unpacked: Unpacked, scratch: Path, how: str, *, config_dir: Path | None = None
    ) -> None:
        self.u, self.scratch, self.how, self.config_dir = unpacked, scratch, how, config_dir
        self.name = f"wt-{uuid.uuid4().hex[:10]}"

    def _spec(self, args: list[str], env: dict[str, str]) -> dict[str, Any]:
        spec = copy.deepcopy(self.u.template())
        proc = spec["process"]
        proc["args"], proc["terminal"] = args, False
        proc["env"] = [*proc.get("env", []), *(f"{k}={v}" for k, v in env.items())]
        spec["root"] = {"path": str(self.u.rootfs), "readonly": True}
        spec["linux"]["namespaces"] = [n for n in spec["linux"]["namespaces"] if n["type"] != "network"]
        mounts = [m for m in spec["mounts"] if m["destination"] not in ("/tmp", "/etc/watchtower")]
        mounts.append(
            {
                "destination": "/tmp",
                "type": "tmpfs",
                "source": "tmpfs",
                "options": ["nosuid", "nodev", "mode=1777"],
            }
        )
        mounts.append(
            {
                "destination": "/var/lib/watchtower",
                "type": "tmpfs",
                "source": "tmpfs",
                "options": ["nosuid", "nodev", "uid=65532", "gid=65532", "mode=0750"],
            }
        )
        if self.config_dir is not None:
            mounts.append(
                {
                    "destination": "/etc/watchtower",
                    "type": "bind",
                    "source": str(self.config_dir),
                    "options": ["rbind", "ro"],
                }
            )
        spec["mounts"] = mounts
        return spec

    def popen(self, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        env = env or {}
        if self.how == "runc":
            bundle = self.scratch / self.name
            bundle.mkdir(parents=True)
            (bundle / "config.json").write_text(json.dumps(self._spec(args, env)))
            cmd = ["runc", "run", "--bundle", str(bundle), self.name]
        else:
            # The chroot fallback: same files, same user; no read-only root or tmpfs (the user still owns
            # nothing outside /home/nonroot and /var/lib/watchtower).
            if self.config_dir is not None:
                target = self.u.rootfs / "etc" / "watchtower"
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(self.config_dir, target)
            cmd = [
                "chroot",
                "--userspec=65532:65532",
                str(self.u.rootfs),
                "/usr/bin/env",
                *(f"{k}={v}" for k, v in env.items()),
                *args,
            ]
        return subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={"PATH": os.environ["PATH"]}
        )

    def run(
        self, args: list[str], *, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        p = self.popen(args, env)
        try:
            out, err = p.communicate(timeout=timeout)
        finally:
            self.cleanup()
        return subprocess.CompletedProcess(args, p.returncode, out, err)

    def signal(self, sig: str) -> None:
        if self.how == "runc":
            subprocess.run(["runc", "kill", self.name, sig], check=False, capture_output=True, timeout=30)

    def cleanup(self) -> None:
        if self.how == "runc":
            subprocess.run(
                ["runc", "delete", "--force", self.name], check=False, capture_output=True, timeout=30
            )
