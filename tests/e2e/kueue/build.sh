#!/usr/bin/env bash
# Builds Kueue's controller manager (sigs.k8s.io/kueue/cmd/kueue) from its Go module into a cache outside the
# work tree. A second run with the same version finds the binary and returns at once.
# Prints the bin directory on its last line.
set -euo pipefail
version=v0.17.0
# A binary built elsewhere (the fixture honours the same variable): nothing to build, no Go needed.
if [ -n "${WATCHTOWER_KUEUE_BIN:-}" ]; then
  [ -x "$WATCHTOWER_KUEUE_BIN/kueue" ] || { echo "build.sh: WATCHTOWER_KUEUE_BIN=$WATCHTOWER_KUEUE_BIN lacks kueue" >&2; exit 3; }
  echo "$WATCHTOWER_KUEUE_BIN"
  exit 0
fi
bin=${WATCHTOWER_CACHE:-$HOME/.cache/watchtower}/kueue-$version/bin
# Waits while another run builds the same thing (tests/setup/build-lock.sh).
. "$(dirname "$0")/../../setup/build-lock.sh"
build_lock "${bin%/bin}"
if [ -x "$bin/kueue" ]; then
  echo "$bin"
  exit 0
fi
# Kueue v0.17.0's go.mod says `go 1.25.0`; with GOTOOLCHAIN=local an older Go fails at once instead of
# fetching a toolchain.
go_needed=1.25.0
hint="install Go >= $go_needed, or point WATCHTOWER_KUEUE_BIN at a directory holding kueue"
command -v go >/dev/null || { echo "build.sh: Kueue $version is built from source and needs Go >= $go_needed; no \`go\` on PATH: $hint" >&2; exit 3; }
have=$(go env GOVERSION 2>/dev/null || true)
have=${have#go}
have=${have%%[!0-9.]*}
if [ -z "$have" ] || [ "$(printf '%s\n%s\n' "$go_needed" "$have" | sort -V | head -1)" != "$go_needed" ]; then
  echo "build.sh: Kueue $version needs Go >= $go_needed; found Go ${have:-of unknown version}: $hint" >&2
  exit 3
fi
export GOTOOLCHAIN=local CGO_ENABLED=0
mkdir -p "$bin"
echo "building kueue $version into $bin" >&2
start=$(date +%s)
# `go install module@version` builds with the module's own go.sum (it has no replace directives), outside any
# work-tree module; GOBIN to a temporary directory so a failed build leaves no half binary in the cache.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
GOBIN=$tmp go install -trimpath -ldflags=-s "sigs.k8s.io/kueue/cmd/kueue@$version"
mv "$tmp/kueue" "$bin/kueue"
echo "built kueue after $(( $(date +%s) - start )) s" >&2
echo "$bin"
