# kubesched — `make run` runs the simulator demo, `make test` runs every check (real control plane included).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# --no-compile: Python writes the bytecode of what is imported on first import; compiling every installed
# module up front (kubernetes_asyncio's generated client alone is 20 MB of .pyc that only `kubesched run`
# imports) costs seconds of install time and 50 MB of venv.
PIP := $(BIN)/python -m pip install -q --disable-pip-version-check --no-compile
# Two stamps: running needs kubesched and its runtime dependencies only (`make run`: a small venv, quickly);
# the checks add the dev extras on top (`make test` after `make run` installs just those).
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: all run test lint typecheck unit integration cluster-bin cluster image bench clean

all: test

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -e .
	@touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(PIP) -e '.[dev]'
	@touch $(DEV_STAMP)

## run: the simulator demo on the embedded cluster (two profiles side by side), with an HTML report
run: $(STAMP)
	@mkdir -p out
	$(BIN)/kubesched simulate --report out/demo-report.html --out-cluster out/demo-result.yaml

## test: lint, type-check, unit tests and integration tests against a real control plane
test: $(DEV_STAMP) lint typecheck cluster-bin
	CI=$${CI:-} $(BIN)/pytest -q -ra

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests bench hack

typecheck: $(DEV_STAMP)
	$(BIN)/mypy src

unit: $(DEV_STAMP)
	$(BIN)/pytest -q tests/unit

integration: $(DEV_STAMP) cluster-bin
	$(BIN)/pytest -q -m integration tests/integration

## cluster-bin: build kube-apiserver, kube-scheduler, kube-controller-manager, etcd and kwok from pinned Go modules (cached)
cluster-bin:
	@if command -v go >/dev/null 2>&1 || test -x /usr/local/go/bin/go; then bash hack/cluster/build.sh; \
	elif [ "$${CI:-}" = "true" ]; then echo "Go is required to build the control plane" >&2; exit 1; \
	else echo "Go not found: integration tests will be skipped"; fi

## cluster: a local control plane (with kube-controller-manager) and 10 KWOK nodes, in the foreground (Ctrl-C stops it);
## REAL_NODE=1 adds a real node (containerd + kubelet, root) and kube-scheduler: see docs/deploy.md
cluster: $(DEV_STAMP) cluster-bin
	$(BIN)/python -m kubesched.testing.controlplane run --nodes 10 $(if $(REAL_NODE),--real-node)

## image: the kubesched OCI image without Docker (deploy/image/build.sh, needs root and umoci) into out/image
image: $(DEV_STAMP)
	bash deploy/image/build.sh --out out/image

## bench: every benchmark side by side with kube-scheduler (SIZE=small|full, ROUNDS=N); writes BENCHMARKS.md
bench: $(DEV_STAMP) cluster-bin
	$(BIN)/python -m bench all --size $(or $(SIZE),full) --rounds $(or $(ROUNDS),3)

clean:
	rm -rf $(VENV) out .mypy_cache .ruff_cache .pytest_cache
