#!/usr/bin/env bash
# Builds kube-apiserver, kube-scheduler, kube-controller-manager and etcd from the
# upstream Go modules pinned in kube/ and etcd/, into a cache outside the work tree.
# A second run with the same versions finds the binaries and returns at once.
# Prints the bin directory on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# Binaries built elsewhere (the fixture honours the same variable): nothing to build, no Go needed.
if [ -n "${WATCHTOWER_CONTROLPLANE_BIN:-}" ]; then
  for b in kube-apiserver kube-scheduler kube-controller-manager etcd; do
    [ -x "$WATCHTOWER_CONTROLPLANE_BIN/$b" ] || { echo "build.sh: WATCHTOWER_CONTROLPLANE_BIN=$WATCHTOWER_CONTROLPLANE_BIN lacks $b" >&2; exit 3; }
  done
  echo "$WATCHTOWER_CONTROLPLANE_BIN"
  exit 0
fi
kube_version=$(awk '/^require k8s.io\/kubernetes/ {print $3}' "$here/kube/go.mod")
etcd_version=$(grep -oE "go.etcd.io/etcd/server/v3 v[0-9.]+" "$here/etcd/go.mod" | head -1 | cut -d" " -f2)
# "-stamped": the kube binaries carry their version (below); an unstamped build's cache is not reused.
cache=${WATCHTOWER_CACHE:-$HOME/.cache/watchtower}/controlplane/kube-$kube_version-etcd-$etcd_version-stamped
bin=$cache/bin
export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS=-mod=readonly
mkdir -p "$bin"
# Waits while another run builds the same thing (tests/setup/build-lock.sh).
. "$here/../../setup/build-lock.sh"
build_lock "$cache"
need=()
for b in kube-apiserver kube-scheduler kube-controller-manager etcd; do
  [ -x "$bin/$b" ] || need+=("$b")
done
# The wrapper modules' `go` lines name the oldest Go that builds them; with GOTOOLCHAIN=local a Go that is
# too old (or none at all) would otherwise end in a wall of module errors.
go_needed=$(awk '/^go [0-9]/ {print $2}' "$here/kube/go.mod" "$here/etcd/go.mod" | sort -V | tail -1)
check_go() {
  local have hint="install Go >= $go_needed, or point WATCHTOWER_CONTROLPLANE_BIN at"
  hint+=" a directory holding kube-apiserver, kube-scheduler, kube-controller-manager and etcd;"
  hint+=" \`make unit\` runs the tests that need no control plane"
  if ! command -v go >/dev/null; then
    echo "build.sh: the control plane (kube $kube_version, etcd $etcd_version) is built from source" \
      "and needs Go >= $go_needed, but no \`go\` is on PATH: $hint" >&2
    exit 3
  fi
  have=$(go env GOVERSION 2>/dev/null || true)
  have=${have#go}
  have=${have%%[!0-9.]*}  # go1.27rc1 -> 1.27
  if [ -z "$have" ] || [ "$(printf '%s\n%s\n' "$go_needed" "$have" | sort -V | head -1)" != "$go_needed" ]; then
    echo "build.sh: kube $kube_version and etcd $etcd_version need Go >= $go_needed;" \
      "found Go ${have:-of unknown version} at $(command -v go) (GOTOOLCHAIN=local: no download): $hint" >&2
    exit 3
  fi
}
# What upstream's hack/lib/version.sh stamps: without it /version says "v0.0.0-master+$Format:%H$", which
# clients that parse the server version refuse (Kueue's manager exits at start-up).
minor=${kube_version#v1.}
minor=${minor%%.*}
kube_ldflags="-s"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  kube_ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
if [ ${#need[@]} -gt 0 ]; then
  check_go
  echo "building ${need[*]} (kube $kube_version, etcd $etcd_version) into $bin" >&2
  start=$(date +%s)
  # Links take ~2 GiB each; on 2 cores one at a time is as fast and safer.
  for b in "${need[@]}"; do
    case $b in
      etcd) (cd "$here/etcd" && go build -trimpath -ldflags=-s -o "$bin/etcd.tmp" go.etcd.io/etcd/server/v3) ;;
      *) (cd "$here/kube" && go build -trimpath -tags selinux,notest -ldflags="$kube_ldflags" -o "$bin/$b.tmp" "k8s.io/kubernetes/cmd/$b") ;;
    esac
    mv "$bin/$b.tmp" "$bin/$b"
    echo "built $b after $(( $(date +%s) - start )) s" >&2
  done
fi
echo "$bin"
