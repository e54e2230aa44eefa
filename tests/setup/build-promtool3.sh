#!/usr/bin/env bash
# Builds a current promtool (3.x; Debian's is 2.42) from the github.com/prometheus/prometheus Go module into a
# cache outside the work tree. A second run finds the binary and returns at once. Prints the binary's path on
# its last line.
# WATCHTOWER_PROMTOOL3 names a promtool 3 built elsewhere: nothing is built and no Go is needed.
# `--no-build`: print the path if the binary is there, build nothing (the tests' question).
# Exit 3: WATCHTOWER_PROMTOOL3 is no executable. Exit 4: no Go (or one too old) to build with; the tests
# skip promtool 3 then, saying so, since there is no way for the binary to exist. Exit 5 (`--no-build`):
# not built yet, and Go could build it.
set -euo pipefail
MODULE=github.com/prometheus/prometheus
VERSION=v0.316.0  # Prometheus 3.16.0: the module's v0.3XX.Y is release 3.XX.Y
GO_NEEDED=1.26.7  # the module's go line
if [ -n "${WATCHTOWER_PROMTOOL3:-}" ]; then
  [ -x "$WATCHTOWER_PROMTOOL3" ] || { echo "build-promtool3.sh: WATCHTOWER_PROMTOOL3=$WATCHTOWER_PROMTOOL3 is not an executable" >&2; exit 3; }
  echo "$WATCHTOWER_PROMTOOL3"
  exit 0
fi
bin=${WATCHTOWER_CACHE:-$HOME/.cache/watchtower}/promtool-$VERSION/bin
# Waits while another run builds the same thing (tests/setup/build-lock.sh).
. "$(dirname "$0")/build-lock.sh"
build_lock "${bin%/bin}"
if [ -x "$bin/promtool" ]; then
  echo "$bin/promtool"
  exit 0
fi
export GOTOOLCHAIN=local CGO_ENABLED=0
hint="or set WATCHTOWER_PROMTOOL3 to a promtool 3 built elsewhere"
command -v go >/dev/null || {
  echo "build-promtool3.sh: promtool ${VERSION} is built from source and needs Go >= $GO_NEEDED on PATH, $hint" >&2
  exit 4
}
have=$(go env GOVERSION 2>/dev/null || true)
have=${have#go}
have=${have%%[!0-9.]*}  # go1.27rc1 -> 1.27
if [ -z "$have" ] || [ "$(printf '%s\n%s\n' "$GO_NEEDED" "$have" | sort -V | head -1)" != "$GO_NEEDED" ]; then
  echo "build-promtool3.sh: promtool $VERSION needs Go >= $GO_NEEDED; found ${have:-none} at $(command -v go)" \
    "(GOTOOLCHAIN=local: no download), $hint" >&2
  exit 4
fi
if [ "${1:-}" = --no-build ]; then
  echo "build-promtool3.sh: promtool $VERSION is not built yet: run $0 (or \`make promtool3\`)" >&2
  exit 5
fi
echo "building promtool $VERSION into $bin" >&2
start=$(date +%s)
# remove_all_sd drops the service-discovery plugins (AWS, Azure, GCE, ...) that `check rules` and
# `test rules` never use: plugins/plugin_*.go are each built only without it. Kubernetes SD stays, as
# cmd/promtool imports it directly. netgo as upstream's release builds (.promu.yml).
# The module has no replace directives, so `go install MODULE@VERSION` builds it as released.
version=$(go mod download -json "$MODULE@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')/VERSION
ldflags="-s -X github.com/prometheus/common/version.Version=$(cat "$version")"
ldflags+=" -X github.com/prometheus/common/version.Branch=HEAD"
ldflags+=" -X github.com/prometheus/common/version.BuildUser=watchtower-tests"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
GOBIN=$work go install -trimpath -tags remove_all_sd,netgo -ldflags="$ldflags" "$MODULE/cmd/promtool@$VERSION"
mkdir -p "$bin"
mv "$work/promtool" "$bin/promtool"
echo "built promtool after $(( $(date +%s) - start )) s" >&2
echo "$bin/promtool"
