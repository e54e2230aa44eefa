#!/usr/bin/env bash
# Generates the prometheus-operator CRDs the tests validate deploy/monitoring/ against, from the Go types of
# the monitoring API module with controller-gen, as upstream's `make generate-crds` does: crd:crdVersions=v1
# over ./v1 and ./v1alpha1, then the operator.prometheus.io/version annotation after controller-gen's own.
# Usage: tests/setup/prometheus-operator-crds.sh [OUT_DIR]   (default: tests/fixtures/crds/prometheus-operator)
#        tests/setup/prometheus-operator-crds.sh --tool-only   (build controller-gen into the cache, nothing else)
# Needs Go and the Go module proxy (or both modules in the module cache).
set -euo pipefail
MODULE=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring
VERSION=v0.95.2
# Upstream's scripts/go.mod pins controller-tools v0.21.0 (v0.93.0, the newest tag read); its CRDs carry it.
CONTROLLER_GEN=v0.21.0
KINDS=(prometheusrules servicemonitors alertmanagerconfigs)

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../fixtures/crds/prometheus-operator}
export GOTOOLCHAIN=local
tools=${WATCHTOWER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/watchtower}/tools/controller-gen-$CONTROLLER_GEN
# Waits while another run builds the same thing (tests/setup/build-lock.sh).
. "$here/build-lock.sh"
build_lock "$tools"
if [ ! -x "$tools/controller-gen" ]; then
  echo "building controller-gen $CONTROLLER_GEN into $tools" >&2
  GOBIN=$tools go install "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_GEN"
fi
[ "$out" = --tool-only ] && exit 0
src=$(go mod download -json "$MODULE@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "cannot download $MODULE@$VERSION" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The module cache is read-only; controller-gen loads the packages from a writable copy.
cp -r "$src" "$work/monitoring"
chmod -R u+w "$work/monitoring"
(cd "$work/monitoring" && "$tools/controller-gen" crd:crdVersions=v1 paths=./v1/. paths=./v1alpha1/. \
  output:crd:dir="$work/crds")
mkdir -p "$out"
for kind in "${KINDS[@]}"; do
  f=monitoring.coreos.com_$kind.yaml
  sed "/^    controller-gen.kubebuilder.io.version.*/a\\    operator.prometheus.io/version: ${VERSION#v}" \
    "$work/crds/$f" >"$out/$f"
done
