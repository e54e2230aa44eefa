# Two commands on a fresh machine: `make demo` runs the service on a simulated cluster; `make test` passes the tests.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint unit e2e bench fmt deps system-deps controlplane alertmanager promtool3 go-builds clean artefacts image

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null || { echo "need $(PY)"; exit 1; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

deps: $(STAMP)

system-deps:
	tests/setup/system-deps.sh

controlplane:
	tests/e2e/controlplane/build.sh >/dev/null
	tests/e2e/kueue/build.sh >/dev/null

# A current Alertmanager and amtool (Debian's is 0.25) and tests/go/webhookcheck, from their Go modules.
alertmanager:
	tests/setup/build-alertmanager.sh >/dev/null

# A current promtool (3.x; Debian's is 2.42) from the Prometheus Go module: the rule tests run with both.
promtool3:
	tests/setup/build-promtool3.sh >/dev/null

# Every Go-built binary the tests use, built side by side (most of a cold CI run's time).
go-builds:
	tests/setup/build-go.sh

# The OCI image from Debian packages and the project's wheels (docs/install.md; Docker users: deploy/image/Dockerfile).
image: system-deps
	deploy/image/build.sh

demo: deps
	$(BIN)/watchtower demo

lint: deps
	$(BIN)/ruff check watchtower dashboards alerts manifests tests bench
	$(BIN)/ruff format --check watchtower dashboards alerts manifests tests bench
	$(BIN)/mypy watchtower/domain
	$(BIN)/mypy watchtower
	$(BIN)/lint-imports
	@echo 'lint-imports skips dashboards/*.dashboard.py (dotted file names); tests/artefacts/test_dashboard_imports.py checks their imports.'

unit: deps
	$(BIN)/pytest -q -m "not e2e"

e2e: deps system-deps controlplane
	$(BIN)/pytest -q -m e2e

# The tests drive real servers (Prometheus, the control plane, SMTP, Chromium) on a shared 2-core machine:
# a failed test runs once more and the summary counts it as a rerun; a real regression fails twice.
# -raR: the summary lists failures, skips with their reasons, xfails and each rerun.
# run-tests.sh runs lint and the tests that need no Go-built binary while the Go builds run (niced) in the
# background, then the rest: a cold run overlaps its longest parts.
test: deps system-deps
	tests/setup/run-tests.sh $(BIN)

bench: deps
	$(BIN)/python bench/tick.py

fmt: deps
	$(BIN)/ruff format watchtower dashboards alerts manifests tests bench
	$(BIN)/ruff check --fix watchtower dashboards alerts manifests tests bench

# Dashboards, Prometheus and Grafana alert rules, promtool tests, Alertmanager config from the configuration
# (CONFIG=FILE or defaults); `make artefacts CHECK=1` writes nothing and fails naming the files that drifted.
artefacts: deps
	$(BIN)/watchtower generate $(if $(CONFIG),--config $(CONFIG)) $(if $(CHECK),--check)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
