#!/usr/bin/env bash
# Builds Grafana's dashboard-linter from the Go module proxy into a cache outside the work tree; a second run
# finds the binary and returns at once. Prints the binary's path on its last line.
set -euo pipefail
cache=${WATCHTOWER_CACHE:-$HOME/.cache/watchtower}/dashboard-linter
bin=$cache/bin
if [ ! -x "$bin/dashboard-linter" ]; then
  command -v go >/dev/null || { echo "build-linter.sh: needs Go on PATH" >&2; exit 3; }
  mkdir -p "$bin"
  GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN=$bin go install github.com/grafana/dashboard-linter@latest
fi
echo "$bin/dashboard-linter"
