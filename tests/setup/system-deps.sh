#!/usr/bin/env bash
# Installs the Debian packages the tests run for real: Prometheus + promtool, Alertmanager + amtool,
# headless Chromium, PostgreSQL (initdb + postgres, for the store tests), VictoriaMetrics (the fleet's global
# engine, tests/prometheus/test_prom_fleet.py). Quick when they are already there. Needs root (or sudo) and the package registry.
set -euo pipefail
want=()
# promtool comes with the prometheus package: one entry for both.
{ command -v prometheus >/dev/null && command -v promtool >/dev/null; } || want+=(prometheus)
command -v amtool >/dev/null || want+=(prometheus-alertmanager)
command -v chromium >/dev/null || want+=(chromium)
command -v victoria-metrics >/dev/null || want+=(victoria-metrics)
command -v wrk >/dev/null || want+=(wrk)  # bench/api_load.py: a load generator lighter than the server it measures
# Debian keeps initdb and postgres off PATH, under /usr/lib/postgresql/<version>/bin.
{ command -v initdb >/dev/null || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; } || want+=(postgresql)
# The image (deploy/image/build.sh): a Debian root filesystem, the OCI layout, and a runtime that runs it.
command -v mmdebstrap >/dev/null || want+=(mmdebstrap)
command -v umoci >/dev/null || want+=(umoci)
command -v runc >/dev/null || want+=(runc)
if [ ${#want[@]} -eq 0 ]; then exit 0; fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing Debian packages: ${want[*]}" >&2
# For tests of this script: say what would be installed, install nothing.
if [ "${WATCHTOWER_DEPS_DRY_RUN:-}" = 1 ]; then exit 0; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
# The Debian packages start their services; the tests start their own on free ports.
for svc in prometheus prometheus-alertmanager prometheus-node-exporter postgresql victoria-metrics; do
  $sudo systemctl disable --now "$svc" >/dev/null 2>&1 || true
done
