# Offline plan and tests; every target creates the virtualenvs it needs from pinned requirements.
# `make help` lists the targets: each has a `## ` line above it, which is its entry there.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CHECKOV_VENV := .venv-checkov
# The policy pack's environment, where PulumiPolicy.yaml points the engine (virtualenv: venv).
POLICY_VENV := policy/venv
STACK ?= dev
.DEFAULT_GOAL := help

.PHONY: help venv environments environments-and-policy-test torch-cpu chromium plan plans plan-diff cost test test-scenarios lint pytest policy-venv policy-test policy bench clean verify

# PyTorch's own index serves the CPU build of the torch requirements-dev.txt pins, as
# <version>+cpu, which `torch==<version>` accepts (PEP 440: a pin without a local label matches any);
# PyPI's wheel of it is the CUDA build, with several GB of nvidia-* wheels. $(VENV)/.dev installs
# torch from there first when the index answers a HEAD request within 5 s, so the
# `pip install -r requirements-dev.txt` after it finds the pin satisfied and keeps the CPU build.
# When it does not answer (offline, a proxy), one line says so and pip's own configuration decides
# (PyPI's CUDA build; on our machines, the local wheel cache's CPU build); so it does when the index
# answers but the install from it fails. A .venv that already holds the CUDA build keeps it (the pin
# is satisfied): `make clean` first to change it.
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
TORCH_PIN = $(shell grep -E '^torch==' requirements-dev.txt)
# Only torch (and what it depends on) comes from that index: everything else stays on PyPI.
define install_torch_cpu
	@if $(PY) scripts/_index_answers.py "$(TORCH_CPU_INDEX)/torch/"; then \
		echo "torch: $(TORCH_PIN) from $(TORCH_CPU_INDEX) (the CPU build)"; \
		$(PY) -m pip install --quiet --disable-pip-version-check --index-url "$(TORCH_CPU_INDEX)" "$(TORCH_PIN)" \
			|| echo "torch: the CPU build did not install from $(TORCH_CPU_INDEX) (an index that answers but does not serve the wheel?); falling back to pip's configured index"; \
	else \
		echo "torch: $(TORCH_CPU_INDEX) did not answer within 5 s; falling back to pip's configured index (PyPI: the CUDA build, with nvidia-* wheels)"; \
	fi
endef

## this list: every target with the `## ` line above it in the Makefile
help:
	@awk '/^## / { doc = substr($$0, 4); next } \
		/^[a-z][a-z-]*:/ && doc { printf "  make %-12s %s\n", substr($$0, 1, index($$0, ":") - 1), doc } \
		{ doc = "" }' $(firstword $(MAKEFILE_LIST))

$(VENV)/.runtime: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

$(VENV)/.verify: $(VENV)/.runtime requirements-verify.txt
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-verify.txt
	touch $@

# The framework trainers (transformers, lightning, accelerate) of the bring-your-own-trainer tests
# install after torch, so pip keeps the torch requirements-dev.txt put there.
$(VENV)/.dev: $(VENV)/.runtime $(VENV)/.verify requirements-dev.txt requirements-frameworks.txt
	$(install_torch_cpu)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-frameworks.txt
	touch $@

# checkov pins an old `packaging` the Pulumi SDK cannot run with: it gets a venv of its own.
$(CHECKOV_VENV)/.installed: requirements-checkov.txt
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-checkov.txt
	touch $@

# pulumi-policy pins protobuf 5.29, the program runs on 6.x: the pack gets a venv of its own.
$(POLICY_VENV)/.installed: policy/requirements.txt policy/requirements-test.txt
	test -x $(POLICY_VENV)/bin/python || $(PYTHON) -m venv $(POLICY_VENV)
	$(POLICY_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r policy/requirements-test.txt
	touch $@

## the policy pack's own virtualenv (policy/venv)
policy-venv: $(POLICY_VENV)/.installed

## install the CPU build of torch into .venv now (make test does it first when the index answers)
torch-cpu: $(VENV)/.runtime
	$(install_torch_cpu)

## the program's virtualenv (.venv) from requirements.txt: what the scripts run with
venv: $(VENV)/.runtime

# Cached bytecode of the project's own modules. Python writes it on import unless
# PYTHONDONTWRITEBYTECODE is set (it is on the machines this project is built on): then every plan
# compiled its ~90 modules again (0.06 s of a 2 s prod plan). compileall writes it all the same, as pip
# does for installed packages; Python ignores a cached file whose source has changed since (mtime, size).
PROJECT_SOURCES := $(wildcard components/*.py components/*/*.py offline/*.py scripts/*.py bootstrap/*.py)
BYTECODE := $(VENV)/.bytecode
$(BYTECODE): $(VENV)/.runtime $(PROJECT_SOURCES)
	$(PY) -m compileall -q components offline scripts bootstrap
	touch $@

# The bootstrap is a Pulumi project of its own (bootstrap/Pulumi.yaml); its stack is `bootstrap`.
## synthesise one stack offline into build/<stack>/: make plan STACK=dev (STACK=bootstrap: bootstrap/)
plan: $(BYTECODE)
	$(PY) scripts/plan.py $(if $(filter bootstrap,$(STACK)),--project bootstrap) --stack $(STACK)

## plan every stack of both projects into build/
plans: $(BYTECODE)
	$(PY) scripts/plan.py --all --project . --project bootstrap

## what the working tree changes in the plans of the stacks it can affect: make plan-diff BASE=origin/main (PLAN_DIFF_ALL=1: every stack)
plan-diff: $(BYTECODE)
	scripts/plan-diff $(BASE)

## what a stack costs (docs/cost.md): make cost STACK=prod [ARGS="--nat-gb 500"]; every region of an environment: make cost ENVIRONMENT=prod
cost: $(BYTECODE)
	$(if $(ENVIRONMENT),$(PY) scripts/cost.py --environment $(ENVIRONMENT) $(ARGS),$(PY) scripts/cost.py $(if $(filter bootstrap,$(STACK)),--project bootstrap) --stack $(STACK) $(ARGS))

## ruff, basedpyright, the generated config docs, shellcheck, actionlint, hadolint
lint: $(VENV)/.dev $(POLICY_VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/basedpyright
	$(VENV)/bin/basedpyright -p policy
	$(PY) scripts/config_docs.py --check
	$(VENV)/bin/shellcheck .ci/run $(wildcard scripts/*.sh scripts/build-image scripts/plan-diff scripts/deploy-environment scripts/check-branch-tip scripts/check-runner-tools trainer/*.sh)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/actionlint
	@if [ -f trainer/Dockerfile ]; then $(VENV)/bin/hadolint trainer/Dockerfile; fi

# The viewer's browser test (tests/test_viewer_browser.py) drives the distribution's Chromium:
# Debian's `chromium` package (https://packages.debian.org/bookworm/chromium), installed with
# apt-get when /usr/bin/chromium is missing, through sudo when not root. Playwright (requirements-dev.txt)
# then downloads no browser of its own. Under CI=true the test fails without it.
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
## Debian's chromium for the viewer's browser test (apt-get, sudo when not root; nothing when present)
chromium:
	@if [ -x $(CHROMIUM) ]; then :; else \
		echo "chromium: $(CHROMIUM) is missing; installing Debian's chromium package"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; \
	fi

# $(CURDIR) quoted: the checkout's path may hold a space (tests/test_delivery_scripts.py).
# The scenarios (real launcher gangs, the browser: tests/conftest.py) are `test-scenarios`'s, so that
# `make test` stays near 12 minutes on 2 cores; .ci/run runs both.
# They run on every core (pytest-xdist), at most 4 workers: each plans the stacks its tests ask for
# once (about 1 GB each), so more workers mostly plan the same stacks again. worksteal hands out
# single tests and lets an idle worker take a busy one's queue, so the longest file (the fuzzer's)
# does not run alone at the end. The scenarios stay on one process: their gangs time themselves.
PYTEST_WORKERS ?= -n auto --maxprocesses 4 --dist worksteal
## every test but the scenarios (config tables, synthesised stacks, manifests, trainer units, scripts)
pytest: $(VENV)/.dev $(CHECKOV_VENV)/.installed $(BYTECODE)
	CHECKOV="$(CURDIR)/$(CHECKOV_VENV)/bin/checkov" $(PY) -m pytest -m "not scenario" $(PYTEST_WORKERS)

## the scenarios: 2-node launcher gangs (every framework, every fault), the viewer in Chromium
test-scenarios: $(VENV)/.dev $(BYTECODE) chromium
	$(PY) -m pytest -m scenario

# The pack's tests read the plans (the engine's inputs) that `plans` writes with the program's venv.
## the policy pack's tests on every stack's offline plan
policy-test: plans $(POLICY_VENV)/.installed
	$(POLICY_VENV)/bin/python -m pytest policy/tests

## run the policy pack (policy/) over every stack's offline plan
policy: plans $(POLICY_VENV)/.installed
	$(POLICY_VENV)/bin/python policy/check_plans.py $(patsubst stacks/Pulumi.%.yaml,build/%,$(sort $(wildcard stacks/Pulumi.*.yaml))) \
		$(patsubst bootstrap/Pulumi.%.yaml,build/%,$(wildcard bootstrap/Pulumi.*.yaml))

# The three virtualenvs first, side by side: they are separate directories, and most of a fresh
# clone's first minutes are pip downloading and unpacking wheels one venv after the other.
ENVIRONMENTS := $(VENV)/.dev $(CHECKOV_VENV)/.installed $(POLICY_VENV)/.installed
## every virtualenv the tests use (.venv, .venv-checkov, policy/venv), installed side by side
environments:
	@$(MAKE) --no-print-directory -j3 $(ENVIRONMENTS)
# The pack's tests and the plans they read need only .venv's runtime packages and the pack's venv,
# so they run while pip installs .venv's dev and framework packages (torch, transformers: one pip
# process, mostly disk and network) on the core it leaves idle; pip never changes a runtime package
# there (the 28 of requirements.txt keep their versions). On 2 cores (2026-12-07) plans took 12 s of
# CPU and policy-test 49 s in a fresh clone's make test, both after pytest then; a fresh clone's
# .venv/.verify and .venv/.dev took 108 s after .venv/.runtime (2026-12-06): room for both.
# -O keeps each target's lines together (the pack's tests, pip's warnings).
## every virtualenv, and the policy pack's tests while pip still installs .venv's (make test's first step)
environments-and-policy-test:
	@$(MAKE) --no-print-directory -j4 --output-sync=target $(ENVIRONMENTS) policy-test
## lint + pytest + policy-test (CI, .ci/run and the workflows' test jobs, runs test-scenarios after it)
test: environments-and-policy-test lint pytest

## go-live checks against the live cluster: make verify STACK=prod ARGS="--job pretrain-p5"
verify: $(VENV)/.verify
	$(PY) scripts/verify --stack $(STACK) $(ARGS)

# Speed goals as ratios against a floor measured in the same run (never timed tests), each with a
# met / not met verdict (bench/harness.py). The plan benches import offline/ from the repository
# root (run as modules); the trainer bench imports the trainer's packages from the path the trainer
# image gives them (PYTHONPATH). The trainer bench's disk check runs first, before the minutes of
# plan figures; it writes into a temporary directory it removes. The recovery bench runs two
# launchers of the example trainer on localhost and faults them (several minutes on 2 CPUs).
## speed goals against floors measured in the same run, with verdicts (JSON: build/bench/latest.json)
bench: $(VENV)/.dev $(BYTECODE)
	PYTHONPATH="$(CURDIR)/trainer" $(PY) bench/trainer_bench.py --check-disk
	rm -f build/bench/latest.json
	$(PY) -m bench.plan_bench --json build/bench/latest.json
	PYTHONPATH="$(CURDIR)/trainer" $(PY) bench/trainer_bench.py --json build/bench/latest.json
	PYTHONPATH="$(CURDIR)/trainer" $(PY) bench/recovery_bench.py --json build/bench/latest.json
	@echo "bench: to publish these figures: cp build/bench/latest.json docs/bench/ && $(PY) -m bench.doc_block --write"

## remove build/, the virtualenvs and the caches
clean:
	rm -rf build $(VENV) $(CHECKOV_VENV) $(POLICY_VENV) .pytest_cache .ruff_cache
