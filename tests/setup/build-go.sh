#!/usr/bin/env bash
# Builds every binary the tests take from a Go module (the control plane, Kueue, a current Alertmanager,
# promtool 3, controller-gen, kustomize and helm), each script into its own cache directory, all at once.
# On two cores one build alone leaves a core idle through its downloads and links; run together they keep
# both busy, which is most of a cold CI run's time. Each build's log goes to a temporary file, shown when
# that build fails. A second run finds every binary and returns at once.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
builds=(
  "controlplane:$root/tests/e2e/controlplane/build.sh"
  "kueue:$root/tests/e2e/kueue/build.sh"
  "alertmanager:$root/tests/setup/build-alertmanager.sh"
  "promtool3:$root/tests/setup/build-promtool3.sh"
  "controller-gen:$root/tests/setup/prometheus-operator-crds.sh --tool-only"
  "kustomize:$root/tests/setup/build-deploy-tools.sh kustomize"
  "helm:$root/tests/setup/build-deploy-tools.sh helm"
)
declare -A names
start=$(date +%s)
for b in "${builds[@]}"; do
  name=${b%%:*}
  # shellcheck disable=SC2086  # the command carries its own arguments
  ${b#*:} >"$logs/$name.log" 2>&1 &
  names[$!]=$name
done
failed=0
# `wait -n -p` reports each build as it ends, so the times printed are when each was ready.
while [ ${#names[@]} -gt 0 ]; do
  wait -n -p done_pid "${!names[@]}"
  rc=$?
  name=${names[$done_pid]}
  unset "names[$done_pid]"
  if [ $rc -eq 0 ]; then
    echo "build-go.sh: $name ready after $(( $(date +%s) - start )) s" >&2
  else
    echo "build-go.sh: $name failed (exit $rc); its log:" >&2
    tail -n 40 "$logs/$name.log" >&2
    failed=1
  fi
done
exit $failed
