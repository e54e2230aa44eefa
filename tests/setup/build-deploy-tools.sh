#!/usr/bin/env bash
# Builds kustomize and helm, which the deploy tests render deploy/ with, from their Go modules into a cache
# outside the work tree (one directory per tool and version). A second run finds the binary and returns at
# once. Prints the binary's path on its last line.
# Usage: build-deploy-tools.sh kustomize|helm [--no-build]
#   --no-build: print the path if the binary is there, build nothing (the tests' question).
# WATCHTOWER_KUSTOMIZE / WATCHTOWER_HELM name a binary built elsewhere: nothing is built and no Go is needed.
# Exit 2: usage. Exit 3: the named binary is no executable. Exit 4: no Go (or one too old) to build with; the
# tests skip then, saying so. Exit 5 (`--no-build`): not built yet, and Go could build it.
set -euo pipefail
tool=${1:-}
case $tool in
  kustomize)
    module=sigs.k8s.io/kustomize/kustomize/v5
    # v5.8.3 says `go 1.27.0`; v5.8.2 (kustomize/api v0.21.2) is the newest this machine's Go 1.26 builds.
    version=v5.8.2
    go_needed=1.26.0
    pkg=$module
    ldflags="-s -w -X sigs.k8s.io/kustomize/api/provenance.version=$version"
    override=${WATCHTOWER_KUSTOMIZE:-}
    ;;
  helm)
    module=helm.sh/helm/v3
    version=v3.22.0
    go_needed=1.26.0
    pkg=$module/cmd/helm
    # As upstream's Makefile sets them: without, `helm version` says only v3.22, and `helm template` and
    # `lint` assume Kubernetes v1.20 (pkg/chartutil/capabilities.go), which a chart's kubeVersion refuses.
    ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
    kube_ldflags=1  # the Kubernetes version is client-go's (v0.X.Y -> 1.X), read from the module below
    override=${WATCHTOWER_HELM:-}
    ;;
  *)
    echo "usage: $0 kustomize|helm [--no-build]" >&2
    exit 2
    ;;
esac
if [ -n "$override" ]; then
  [ -x "$override" ] || { echo "build-deploy-tools.sh: $override (WATCHTOWER_${tool^^}) is not an executable" >&2; exit 3; }
  echo "$override"
  exit 0
fi
bin=${WATCHTOWER_CACHE:-$HOME/.cache/watchtower}/$tool-$version/bin
if [ -x "$bin/$tool" ]; then
  echo "$bin/$tool"
  exit 0
fi
export GOTOOLCHAIN=local CGO_ENABLED=0
hint="or set WATCHTOWER_${tool^^} to a $tool built elsewhere"
command -v go >/dev/null || {
  echo "build-deploy-tools.sh: $tool $version is built from source and needs Go >= $go_needed on PATH, $hint" >&2
  exit 4
}
have=$(go env GOVERSION 2>/dev/null || true)
have=${have#go}
have=${have%%[!0-9.]*}
if [ -z "$have" ] || [ "$(printf '%s\n%s\n' "$go_needed" "$have" | sort -V | head -1)" != "$go_needed" ]; then
  echo "build-deploy-tools.sh: $tool $version needs Go >= $go_needed; found ${have:-none} at $(command -v go)" \
    "(GOTOOLCHAIN=local: no download), $hint" >&2
  exit 4
fi
if [ "${2:-}" = --no-build ]; then
  echo "build-deploy-tools.sh: $tool $version is not built yet: run $0 $tool (or \`make go-builds\`)" >&2
  exit 5
fi
echo "building $tool $version into $bin" >&2
start=$(date +%s)
# Neither module has replace directives, so `go install MODULE@VERSION` builds it as released, with its own
# go.sum; GOBIN to a temporary directory so a failed build leaves no half binary in the cache.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "${kube_ldflags:-}" ]; then
  mod=$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  minor=$(awk '$1 == "k8s.io/client-go" {split($2, v, "."); print v[2]; exit}' "$mod")
  [ -n "$minor" ] || { echo "build-deploy-tools.sh: no k8s.io/client-go in $mod" >&2; exit 1; }
  for pkg_var in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldflags+=" -X $pkg_var.k8sVersionMajor=1 -X $pkg_var.k8sVersionMinor=$minor"
  done
fi
GOBIN=$work go install -trimpath -ldflags="$ldflags" "$pkg@$version"
mkdir -p "$bin"
mv "$work/$tool" "$bin/$tool"
echo "built $tool after $(( $(date +%s) - start )) s" >&2
echo "$bin/$tool"
