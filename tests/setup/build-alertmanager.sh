#!/usr/bin/env bash
# Builds a current Alertmanager (alertmanager, amtool) from its Go module, and the tests' webhookcheck
# (tests/go/webhookcheck: Alertmanager's own webhook types), into a cache outside the work tree.
# A second run finds the binaries and returns at once. Prints the bin directory on its last line (with
# the argument `webhookcheck`: the check program's path).
# WATCHTOWER_ALERTMANAGER_BIN names a directory that already holds alertmanager and amtool (built
# elsewhere); webhookcheck is still built here, from the checkout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
check_src=$(cd "$here/../go/webhookcheck" && pwd)
version=$(awk '$1 == "github.com/prometheus/alertmanager" {print $2}' "$check_src/go.mod")
cache=${WATCHTOWER_CACHE:-$HOME/.cache/watchtower}/alertmanager-$version
bin=${WATCHTOWER_ALERTMANAGER_BIN:-$cache/bin}
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
# The check program changes with the checkout: its binary is named for its sources.
check_sum=$(cat "$check_src/main.go" "$check_src/go.mod" "$check_src/go.sum" | sha256sum | cut -c1-12)
check_bin=$cache/webhookcheck-$check_sum
# Waits while another run builds the same thing (tests/setup/build-lock.sh).
. "$here/build-lock.sh"
build_lock "$cache"
need_go() {
  command -v go >/dev/null || {
    echo "build-alertmanager.sh: Alertmanager $version is built from source and needs Go on PATH," \
      "or WATCHTOWER_ALERTMANAGER_BIN pointing at a directory holding alertmanager and amtool" >&2
    exit 3
  }
}
if [ -n "${WATCHTOWER_ALERTMANAGER_BIN:-}" ]; then
  for b in alertmanager amtool; do
    [ -x "$bin/$b" ] || { echo "build-alertmanager.sh: WATCHTOWER_ALERTMANAGER_BIN=$bin lacks $b" >&2; exit 3; }
  done
elif [ ! -x "$bin/alertmanager" ] || [ ! -x "$bin/amtool" ]; then
  need_go
  start=$(date +%s)
  echo "building alertmanager and amtool $version into $bin" >&2
  dir=$(go mod download -json "github.com/prometheus/alertmanager@$version" | awk -F'"' '/"Dir"/ {print $4}')
  # The module holds the web UI's sources but not its compiled assets (ui/app/dist, built with npm and
  # embedded with go:embed): a copy of the source with a placeholder page builds; the API is all the
  # tests use.
  src=$cache/src
  rm -rf "$src" && mkdir -p "$cache" && cp -r "$dir" "$src" && chmod -R u+w "$src"
  for ui in elm mantine; do
    mkdir -p "$src/ui/app/dist/$ui"
    echo "<!doctype html><title>Alertmanager</title><p>UI not built (API only)." >"$src/ui/app/dist/$ui/index.html"
  done
  mkdir -p "$bin"
  ldflags="-s -X github.com/prometheus/common/version.Version=${version#v} -X github.com/prometheus/common/version.Branch=HEAD"
  for b in alertmanager amtool; do
    (cd "$src" && go build -trimpath -ldflags="$ldflags" -o "$bin/$b.tmp" "./cmd/$b")
    mv "$bin/$b.tmp" "$bin/$b"
    echo "built $b after $(( $(date +%s) - start )) s" >&2
  done
  rm -rf "$src"
fi
if [ ! -x "$check_bin" ]; then
  need_go
  (cd "$check_src" && go build -trimpath -ldflags=-s -o "$check_bin.tmp" .)
  mv "$check_bin.tmp" "$check_bin"
fi
if [ "${1:-}" = webhookcheck ]; then echo "$check_bin"; else echo "$bin"; fi
