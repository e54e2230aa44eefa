#!/usr/bin/env bash
# Builds Watchtower's OCI image on a Debian machine without pulling any base image: the root filesystem comes
# from Debian packages (mmdebstrap, the host's own apt sources and release), the service from the project's
# wheel and its dependencies' wheels (pip, the host's index), the image from that filesystem (umoci).
# It holds what deploy/image/Dockerfile builds for Docker users: Debian's python3 (3.11 on bookworm),
# ca-certificates and tzdata; the service in /opt/watchtower; no compiler, no pip, no apt lists; user 65532;
# `watchtower` as the entrypoint.
#
# Usage: deploy/image/build.sh [OUT_DIR]
#   OUT_DIR (default ~/.cache/watchtower/image/<version>-<sources hash>) receives
#     oci/      the OCI image layout, tag <version>: `umoci unpack --image OUT_DIR/oci:<version> BUNDLE` gives a
#               bundle runc runs; `skopeo copy oci:OUT_DIR/oci:<version> docker-daemon:watchtower:<version>` or
#               `podman load` hands it to a container engine
# Prints OUT_DIR on its last line. A second run with the same sources returns at once.
# Needs root (mmdebstrap's root mode, chroot, umoci), mmdebstrap and umoci (Debian packages), Python 3.11 with pip.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${PYTHON:-python3.11}
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/pyproject.toml" | head -1)
# The image changes with the service's sources, its dependencies and this recipe: name it after all three.
srchash=$(cd "$root" && { git ls-files -z watchtower pyproject.toml deploy/image 2>/dev/null || find watchtower pyproject.toml deploy/image -type f -print0; } \
  | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12)
out=${1:-${WATCHTOWER_CACHE:-$HOME/.cache/watchtower}/image/$version-$srchash}
# Another run (a test's fixture, `make image`) may be building the same image: wait for it.
. "$root/tests/setup/build-lock.sh"
build_lock "$(dirname "$out")"
if [ -f "$out/.done" ]; then
  echo "$out"
  exit 0
fi
for tool in mmdebstrap umoci chroot; do
  command -v "$tool" >/dev/null || { echo "build.sh: needs $tool (Debian packages mmdebstrap, umoci)" >&2; exit 3; }
done
[ "$(id -u)" -eq 0 ] || { echo "build.sh: needs root (mmdebstrap's root mode, chroot, umoci)" >&2; exit 3; }
# The same Debian release as the host, from the host's apt sources: the host's mirror, never a named one.
. /etc/os-release
suite=${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}
sources=/etc/apt/sources.list.d/debian.sources
[ -f "$sources" ] || sources=/etc/apt/sources.list
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
step() { echo "build.sh: $1 after $(( $(date +%s) - start )) s" >&2; }

# 1. Wheels of the project and every dependency, for CPython 3.11 on this architecture, by a pip of its own
# (a pip of the host's environment would weigh the host's packages).
"$py" -m venv "$work/pip"
pip=("$work/pip/bin/pip" --quiet --disable-pip-version-check)
"${pip[@]}" wheel -w "$work/wheels" "$root"
step "wheels ($(ls "$work/wheels" | wc -l))"

# 2. A minimal Debian with the interpreter the wheels are for; no documentation, manuals or translations.
# Kept as a tarball beside the images: it changes with the release and this list, not with the service.
packages=python3,ca-certificates,tzdata
base=$(dirname "$out")/debian-$suite-$(echo "$packages" | sha256sum | cut -c1-8).tar
if [ ! -f "$base" ]; then
  mkdir -p "$(dirname "$base")"
  mmdebstrap --quiet --format=tar --variant=minbase --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    "$suite" "$base.tmp" "$sources"
  mv "$base.tmp" "$base"
fi
mkdir "$work/rootfs"
tar -xf "$base" -C "$work/rootfs" --numeric-owner
rfs=$work/rootfs
step "Debian $suite root filesystem"

# 3. The service in a virtual environment of Debian's python3; installed from outside, so no pip lands inside.
chroot "$rfs" /usr/bin/python3 -m venv --without-pip /opt/watchtower
site=$(echo "$rfs"/opt/watchtower/lib/python3*/site-packages)
"${pip[@]}" install --no-index --find-links "$work/wheels" --no-compile --target "$site" watchtower
rm -rf "$site"/bin  # console scripts written with the host's interpreter path; the entrypoint is below
cat > "$rfs/usr/local/bin/watchtower" <<'PY'
#!/opt/watchtower/bin/python
import sys

from watchtower.cli import cli

sys.exit(cli())
PY
chmod 0755 "$rfs/usr/local/bin/watchtower"
# Byte-code compiled now: the root filesystem is read-only at run time.
chroot "$rfs" /opt/watchtower/bin/python -m compileall -q -j 0 /opt/watchtower/lib >/dev/null
step "service installed"

# 4. The unprivileged user the Pod's securityContext names, and nothing a running image does not need.
echo 'nonroot:x:65532:65532:watchtower:/home/nonroot:/usr/sbin/nologin' >>"$rfs/etc/passwd"
echo 'nonroot:x:65532:' >>"$rfs/etc/group"
install -d -o 65532 -g 65532 -m 0750 "$rfs/home/nonroot" "$rfs/var/lib/watchtower"
rm -rf "$rfs"/var/lib/apt/lists/* "$rfs"/var/cache/apt/* "$rfs"/var/log/* "$rfs"/tmp/* \
  "$rfs"/usr/lib/python3/dist-packages/pip "$rfs"/usr/share/python-wheels
: >"$rfs/etc/machine-id"

# 5. The OCI image: one layer of that filesystem, the configuration a Deployment relies on.
rm -rf "$out" && mkdir -p "$out"
umoci init --layout "$out/oci"
umoci new --image "$out/oci:$version"
umoci unpack --image "$out/oci:$version" "$work/bundle" >/dev/null
rm -rf "$work/bundle/rootfs" && mv "$rfs" "$work/bundle/rootfs"
umoci repack --image "$out/oci:$version" "$work/bundle"
umoci config --image "$out/oci:$version" \
  --config.user 65532:65532 --config.workingdir /home/nonroot \
  --config.entrypoint /usr/local/bin/watchtower \
  --config.cmd run --config.cmd --config --config.cmd /etc/watchtower/config.yaml \
  --config.env PATH=/opt/watchtower/bin:/usr/local/bin:/usr/bin:/bin --config.env PYTHONDONTWRITEBYTECODE=1 \
  --config.env PYTHONUNBUFFERED=1 --config.exposedports 8080/tcp \
  --config.label org.opencontainers.image.title=watchtower \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.base.name=debian:$suite (mmdebstrap minbase)" \
  --history.created_by "deploy/image/build.sh ($srchash)"
umoci gc --layout "$out/oci"
touch "$out/.done"
step "image $version ($(du -sh "$out/oci" | cut -f1) in the OCI layout)"
echo "$out"
