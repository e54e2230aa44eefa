#!/usr/bin/env bash
# What `make test` runs after the Python and Debian set-up: lint, then every test, with the Go builds (most of
# a cold run's time) overlapped with the tests that need none of their binaries.
#   1. tests/setup/build-go.sh starts in the background, niced, so the tests keep the CPU they ask for and
#      the builds take what is left (downloads and links leave a core idle in any case);
#   2. lint runs, then every test not marked `gobuilt` (tests/conftest.py);
#   3. once the builds are done, the `gobuilt` tests run (the e2e scenarios, promtool 3, the current
#      Alertmanager and amtool, webhookcheck, controller-gen).
# A test that needs a binary still being built waits for it (tests/setup/build-lock.sh) rather than building
# it twice. With every binary cached, step 1 returns at once. Usage: run-tests.sh VENV_BIN_DIR
set -uo pipefail
bin=${1:?usage: run-tests.sh VENV_BIN_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
pytest=("$bin/pytest" -q -raR --reruns 1 --reruns-delay 2 --durations=25)
log=$(mktemp)
start=$(date +%s)
# Its own session, so a failed lint can end the whole build tree by its process group.
setsid nice -n 10 tests/setup/build-go.sh >"$log" 2>&1 &
builds=$!
stop_builds() { kill -- "-$builds" 2>/dev/null; wait "$builds" 2>/dev/null; }
trap 'stop_builds; rm -f "$log"' INT TERM
elapsed() { echo "$(( $(date +%s) - start )) s"; }

if ! make -s lint; then
  stop_builds
  rm -f "$log"
  exit 1
fi
"${pytest[@]}" -m "not gobuilt"
first=$?
echo "run-tests.sh: the tests without Go-built binaries ended after $(elapsed); waiting for the Go builds" >&2
wait "$builds"
built=$?
cat "$log" >&2
rm -f "$log"
if [ $built -ne 0 ]; then
  echo "run-tests.sh: a Go build failed (above); the tests that need it fail with its message" >&2
fi
echo "run-tests.sh: Go builds done after $(elapsed)" >&2
"${pytest[@]}" -m gobuilt
second=$?
echo "run-tests.sh: all tests ended after $(elapsed)" >&2
# 5: no test selected, which is not a failure of either half.
for rc in $first $second; do
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then exit 1; fi
done
exit 0
