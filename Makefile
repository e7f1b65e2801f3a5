# The two commands: `make up` (quick start) and `make test` (everything CI runs).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml requirements/constraints.txt | cksum | cut -d' ' -f1)
# The local control plane (kube-apiserver, etcd, kube-controller-manager,
# kubectl, helm) is built from source on first use and cached by version.
BIN_DIR = $$(bash hack/build-control-plane.sh)
# The local node (kubelet, kube-proxy, kube-scheduler, pause, CoreDNS; containerd,
# runc and the CNI plugins from Debian) needs root: `make up NODE=1`, and the pod
# tests in `make test` (docs/local-node.md).
ROOT := $(shell [ "$$(id -u)" = 0 ] && echo yes)

SOURCES := operator tests e2e bench conftest.py

IMAGE ?= ghcr.io/sluiceway/sluiceway:$(shell $(PYTHON) -c "import re;print(re.search(r'^version = \"(.+)\"', open('pyproject.toml').read(), re.M).group(1))")

.PHONY: up test lint format typecheck unit integration e2e chaos bench crds schema controlplane promtool node browser venv clean image

up: venv controlplane $(if $(NODE),node)
	SLUICEWAY_BIN_DIR=$(BIN_DIR) $(PY) -m sluiceway up $(if $(NODE),--node)

test: venv controlplane promtool browser $(if $(ROOT),node) lint
	SLUICEWAY_BIN_DIR=$(BIN_DIR) $(PY) -m pytest -p no:cacheprovider tests e2e

venv: $(STAMP)

$(STAMP): pyproject.toml requirements/constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c requirements/constraints.txt -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@

controlplane:
	@bash hack/build-control-plane.sh >/dev/null

# promtool checks every PromQL expression the chart ships (e2e/test_promql.py), and a
# real Prometheus evaluates them against a live operator (e2e/test_prometheus_live.py).
promtool:
	@bash hack/build-prometheus.sh >/dev/null

# Debian's chromium-headless-shell for the UI's browser tests (e2e/test_ui_browser.py).
browser:
	@bash hack/install-browser.sh

node:
	@bash hack/install-node-packages.sh
	@bash hack/build-node.sh >/dev/null

lint: venv typecheck
	$(VENV)/bin/ruff check $(SOURCES)
	$(VENV)/bin/ruff format --check $(SOURCES)
	$(VENV)/bin/lint-imports
	$(PY) -m sluiceway crds --check
	$(PY) -m sluiceway schema --check
	$(PY) -m sluiceway openapi --check

format: venv
	$(VENV)/bin/ruff check --fix $(SOURCES)
	$(VENV)/bin/ruff format $(SOURCES)

typecheck: venv
	$(VENV)/bin/mypy

unit: venv
	$(PY) -m pytest tests/unit

integration: venv
	$(PY) -m pytest tests/integration

e2e: venv controlplane promtool browser $(if $(ROOT),node)
	SLUICEWAY_BIN_DIR=$(BIN_DIR) $(PY) -m pytest e2e

# The long fault soak (about 100 faults over some 10,000 tasks; several minutes).
# SLUICEWAY_FAULT_SEED replays a seed's plan.
chaos: venv controlplane
	SLUICEWAY_BIN_DIR=$(BIN_DIR) SLUICEWAY_CHAOS=1 $(PY) -m pytest -p no:cacheprovider -s e2e/faults/test_chaos.py

crds: venv
	$(PY) -m sluiceway crds --write

# operator/sluiceway/store/schema.sql: the schema a fresh migration makes, dumped
# from the embedded PostgreSQL (a few seconds); `make lint` fails while it is stale.
schema: venv
	$(PY) -m sluiceway schema --write

clean:
	rm -rf $(VENV) .run .mypy_cache .pytest_cache

# Every goal of docs/performance.md, each script's short form (about 15 minutes on
# 2 cores); `make bench BENCH=` runs the full forms (hours). The figures land in
# .run/bench/figures.json and are compared with bench/recorded.json (printed only).
BENCH ?= --quick
BENCH_SCRIPTS = throughput latency gated continuous workflows backlog kube_cost idle waiters
bench: venv controlplane
	$(PY) -m pip install --quiet -c requirements/constraints.txt -e '.[bench]'
	rm -f .run/bench/figures.json
	set -e; temporal=$$(bash hack/build-temporal.sh); for script in $(BENCH_SCRIPTS); do \
		echo "== bench/$$script.py $(BENCH)"; \
		SLUICEWAY_BIN_DIR=$(BIN_DIR) SLUICEWAY_TEMPORAL=$$temporal $(PY) bench/$$script.py $(BENCH); \
	done
	$(PY) bench/figures.py

# `docker build` where a Docker engine answers, else buildah FROM a Debian base
# made with mmdebstrap (root); either way an OCI or docker archive to load into
# a cluster (`kind load image-archive`, `ctr images import`). Prints its size.
image:
	IMAGE=$(IMAGE) bash hack/build-image.sh sluiceway

# -- SDKs in other languages (sdk/conformance/README.md) ---------------------
# `make test` builds each SDK's conformance program and example worker into
# .run/sdk/<lang>/ (hack/build-sdk-<lang>.sh, idempotent); `make lint` checks
# each SDK's formatting and types and its generated code against sdk/openapi.json.
# Extra prerequisite lines add to `test` and `lint` without touching their rules.
.PHONY: sdks sdk-go lint-sdk-go sdk-typescript lint-typescript
test: sdks
lint: lint-sdk-go lint-typescript
sdks: sdk-go sdk-typescript

# Go (sdk/go, docs/sdk-go.md): gofmt -l, go vet, and the drift check.
sdk-go:
	@bash hack/build-sdk-go.sh
lint-sdk-go:
	@bash hack/lint-sdk-go.sh

# TypeScript (sdk/typescript, docs/sdk-typescript.md): npm ci only when
# package-lock.json changed, tsc only when a source did; strict type check and
# the generated API types must match sdk/openapi.json.
sdk-typescript:
	@bash hack/build-sdk-typescript.sh
lint-typescript: sdk-typescript
	cd sdk/typescript && node_modules/.bin/tsc -p tsconfig.json --noEmit --strict
	cd sdk/typescript && node scripts/generate.mjs --check
