#!/usr/bin/env bash
# Builds kube-apiserver, kube-scheduler, kube-controller-manager and etcd from the
# upstream Go modules pinned in kube/ and etcd/, into a cache outside the work tree.
# A second run with the same versions finds the binaries and returns at once.
# Prints the bin directory on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kube_version=$(awk '/^require k8s.io\/kubernetes/ {print $3}' "$here/kube/go.mod")
etcd_version=$(grep -oE "go.etcd.io/etcd/server/v3 v[0-9.]+" "$here/etcd/go.mod" | head -1 | cut -d" " -f2)
cache=${WATCHTOWER_CACHE:-$HOME/.cache/watchtower}/controlplane/kube-$kube_version-etcd-$etcd_version
bin=$cache/bin
export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS=-mod=readonly
mkdir -p "$bin"
need=()
for b in kube-apiserver kube-scheduler kube-controller-manager etcd; do
  [ -x "$bin/$b" ] || need+=("$b")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "building ${need[*]} (kube $kube_version, etcd $etcd_version) into $bin" >&2
  start=$(date +%s)
  # Links take ~2 GiB each; on 2 cores one at a time is as fast and safer.
  for b in "${need[@]}"; do
    case $b in
      etcd) (cd "$here/etcd" && go build -trimpath -ldflags=-s -o "$bin/etcd.tmp" go.etcd.io/etcd/server/v3) ;;
      *) (cd "$here/kube" && go build -trimpath -tags selinux,notest -ldflags=-s -o "$bin/$b.tmp" "k8s.io/kubernetes/cmd/$b") ;;
    esac
    mv "$bin/$b.tmp" "$bin/$b"
    echo "built $b after $(( $(date +%s) - start )) s" >&2
  done
fi
echo "$bin"
