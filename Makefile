# gpudash: `make help` lists the targets. Every target bootstraps what it needs (virtualenv, Debian packages).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
GPUDASH := $(BIN)/gpudash
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PYTEST_ARGS ?=
# `make test` and `make e2e` run the tests on every CPU (pytest-xdist): most e2e tests wait on servers, not on the
# CPU, so they overlap. Each worker takes whole files, so a file's module-scoped servers start once.
# PYTEST_WORKERS=0 runs them in this one process.
PYTEST_WORKERS ?= auto
PARALLEL := -n $(PYTEST_WORKERS) --dist loadfile

.DEFAULT_GOAL := help
.PHONY: help venv deps deps-demo schema-deps apt-missing dashboards rules generate check-generated lint types test test-fast e2e check push sync diff provision \
        demo exporter bench bench-exporter bench-exporter-real bench-exporter-memory bench-exporter-memory-real bench-attribution bench-attribution-real bench-sync \
        bench-alerts bench-scale bench-scale-fabric bench-rules bench-backtest bench-report backtest report e2e-grafana kubernetes-example git-diff-driver preview clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

venv: $(VENV)/.installed ## create .venv and install gpudash with its dev tools

deps: ## install Prometheus, promtool, Alertmanager, node_exporter, VictoriaMetrics, kubectl, Node.js and npm from Debian when missing
	@$(MAKE) --no-print-directory apt-missing PAIRS="$(DEMO_PAIRS) victoria-metrics:victoria-metrics openssl:openssl kubectl:kubernetes-client node:nodejs npm:npm"

deps-demo: ## install what `make demo` runs (Prometheus, promtool, Alertmanager, node_exporter) when missing
	@$(MAKE) --no-print-directory apt-missing PAIRS="$(DEMO_PAIRS)"

# binary:package pairs; a package is installed only when its binary is not on PATH
DEMO_PAIRS := prometheus:prometheus promtool:prometheus prometheus-alertmanager:prometheus-alertmanager \
              amtool:prometheus-alertmanager prometheus-node-exporter:prometheus-node-exporter

# Grafana's published types (@grafana/schema 11.6, 12.4, 13.2) and TypeScript, as package-lock.json pins them
SCHEMA_DIR := tests/schema
$(SCHEMA_DIR)/node_modules/.installed: $(SCHEMA_DIR)/package-lock.json
	cd $(SCHEMA_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

schema-deps: deps $(SCHEMA_DIR)/node_modules/.installed ## npm ci in tests/schema (Grafana's dashboard types, TypeScript)

apt-missing:
	@missing=""; \
	for pair in $(PAIRS); do \
	  command -v $${pair%%:*} >/dev/null 2>&1 || case " $$missing " in *" $${pair#*:} "*) ;; *) missing="$$missing $${pair#*:}";; esac; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

dashboards: venv ## regenerate dashboards/json/*.json and dashboards/v2/*.json (schema v2) from dashboards/*.py, then verify they are current
	$(GPUDASH) dashboards
	$(GPUDASH) dashboards --check

rules: venv ## regenerate generated/ (alert + recording rules, alertmanager.yml, scrape config)
	$(GPUDASH) rules --format all
	$(GPUDASH) rules --format all --check

generate: dashboards rules ## regenerate every committed artifact

check-generated: venv ## fail when committed dashboards or rules are stale
	$(GPUDASH) dashboards --check
	$(GPUDASH) rules --format all --check

lint: venv ## ruff and mypy
	$(BIN)/ruff check gpudash dashboards tests bench
	$(BIN)/mypy

types: venv schema-deps ## tsc --strict over every dashboard against each pinned @grafana/schema release, and the v2 resources against 13.2's v2 types
	$(BIN)/pytest -q tests/e2e/test_dashboards_tsc.py $(PYTEST_ARGS)

test: venv deps schema-deps lint check-generated ## the whole suite: lint, types, generated files, unit and end-to-end tests
	$(BIN)/pytest -q $(PARALLEL) $(PYTEST_ARGS)

e2e: venv deps ## end-to-end tests only (real Prometheus, Alertmanager, VictoriaMetrics, Grafana stand-in)
	$(BIN)/pytest -q $(PARALLEL) tests/e2e $(PYTEST_ARGS)

check: venv ## run every dashboard and rule query against PROMETHEUS_URL
	$(GPUDASH) check

test-fast: venv ## unit tests only (no servers)
	$(BIN)/pytest -q tests/unit $(PYTEST_ARGS)

push: venv ## push every dashboard to Grafana (GRAFANA_URL, GRAFANA_TOKEN)
	$(GPUDASH) push

sync: venv ## write only what changed to Grafana; refuse to overwrite UI edits
	$(GPUDASH) sync

diff: venv ## show how Grafana differs from the local dashboards
	$(GPUDASH) diff

preview: venv ## draw each dashboard as a PNG from PROMETHEUS_URL into previews/ (COMPARE=REF: before | after)
	$(GPUDASH) preview $(if $(COMPARE),--compare $(COMPARE),)

git-diff-driver: venv ## make `git diff` / `git log -p` show dashboards/json changes panel by panel, in this clone
	git config diff.gpudash.textconv "$(abspath $(GPUDASH)) diff --textconv"
	git config diff.gpudash.cachetextconv true
	@echo "git diff now renders dashboards/json/*.json through gpudash (see .gitattributes; docs/reviewing.md)"

provision: venv ## bring an empty Grafana to a working state (GRAFANA_URL, PROMETHEUS_URL)
	$(GPUDASH) provision

demo: venv deps-demo ## run exporter + Prometheus + Alertmanager locally, check every query (ONCE=1: run once and exit)
	$(GPUDASH) demo $(if $(ONCE),--once,)

exporter: venv ## serve a simulated 8-GPU node on :9400
	$(GPUDASH) exporter --simulate 8

bench: bench-exporter bench-sync bench-alerts ## every benchmark that runs on a laptop

bench-exporter: venv ## exporter scrape latency, CPU and memory
	$(BIN)/python bench/exporter_bench.py

bench-exporter-real: venv ## on a GPU node: NVML sweep cost against raw NVML, values against nvidia-smi
	$(BIN)/python bench/exporter_bench.py --real

bench-exporter-memory: venv ## where the exporter's RSS goes, stage by stage (simulated GPUs)
	$(BIN)/python bench/exporter_memory.py

bench-exporter-memory-real: venv ## on a GPU node: the same, with NVML's import and nvmlInit apart
	$(BIN)/python bench/exporter_memory.py --real

bench-attribution: venv ## what job attribution costs a sweep and /metrics (simulated GPUs)
	$(BIN)/python bench/attribution_bench.py

bench-attribution-real: venv ## on a GPU node: job attribution on NVML, a CUDA process in a Slurm-like cgroup
	$(BIN)/python bench/attribution_real.py

bench-sync: venv ## Grafana push / no-op sync of 200 dashboards against the stand-in, 12.1 (/api) and 13.2 (/apis)
	$(BIN)/python bench/sync_bench.py

bench-alerts: venv deps ## alert-quality report: gpudash rules against naive rules on the scenario corpus
	$(BIN)/python bench/alert_quality.py --backtest

backtest: venv ## what thresholds.yaml would have paged over PROMETHEUS_URL's last 7 days (COMPARE=other.yaml)
	$(GPUDASH) backtest $(if $(COMPARE),--compare $(COMPARE),)

report: venv ## the weekly report (GPU-hours by team, goodput, interruptions) of PROMETHEUS_URL's last SINCE (7d) into REPORTS (reports/)
	$(GPUDASH) report --since $(or $(SINCE),7d) --out $(or $(REPORTS),reports)

bench-report: venv deps ## gpudash report on a backfilled 7 days x 1,024 GPUs (GPUS=1024 DAYS=7), figures into bench/results/
	$(BIN)/python bench/report_scale.py --gpus $(or $(GPUS),1024) --days $(or $(DAYS),7)

bench-backtest: venv deps ## backtest on the scenario corpus against promtool, then at fleet scale (GPUS=1024 HOURS=6)
	$(BIN)/python bench/backtest_quality.py
	$(BIN)/python bench/backtest_bench.py --gpus $(or $(GPUS),1024) --hours $(or $(HOURS),6)

bench-scale: venv deps ## dashboard load time against fleet size (first run ~1 h, cached in .bench/; SIZES=256,1024)
	$(BIN)/python bench/fleet_scale.py $(if $(SIZES),--sizes $(SIZES),)

bench-scale-fabric: venv deps ## the fabric dashboard on 1,024 nodes x 8 InfiniBand ports (first run ~40 min, cached in .bench/)
	$(BIN)/python bench/fleet_scale.py --fabric-section

bench-rules: venv deps ## what every recording and alerting rule costs Prometheus (SIZES=1024,8192; BASELINE=a git revision to time beside)
	$(BIN)/python bench/fleet_scale.py --rule-cost --sizes $(or $(SIZES),1024,8192) $(if $(BASELINE),--rule-baseline $(BASELINE),)

e2e-grafana: venv ## run the sync tests against a real Grafana (GRAFANA_URL, GRAFANA_TOKEN)
	@[ -n "$$GRAFANA_URL" ] || { echo "set GRAFANA_URL (and GRAFANA_TOKEN) to a Grafana you can write to"; exit 2; }
	$(BIN)/pytest -q tests -k sync --real-grafana $(PYTEST_ARGS)

kubernetes-example: ## re-render deploy/kubernetes/rendered.example.yaml with `kubectl kustomize` (tests compare it)
	@{ head -3 deploy/kubernetes/rendered.example.yaml; kubectl kustomize deploy/kubernetes; } > deploy/kubernetes/.rendered.tmp
	@mv deploy/kubernetes/.rendered.tmp deploy/kubernetes/rendered.example.yaml

clean: ## remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info $(SCHEMA_DIR)/node_modules
