# Offline plan and tests. Both targets create the virtualenv from pinned requirements first.
#   make plan STACK=dev     synthesise one stack offline into build/<stack>/
#   make cost STACK=prod    what the stack costs (docs/cost.md); ARGS="--nat-gb 500" for other volumes
#   make plan STACK=bootstrap   the bootstrap program (bootstrap/) into build/bootstrap/
#   make plan-diff BASE=origin/main   what the working tree changes in every stack's plan
#   make test               lint + every test (config tables, synthesised stacks, manifests, trainer,
#                           the policy pack on every stack's plan)
#   make policy             run the policy pack (policy/) over every stack's offline plan
#   make verify STACK=prod ARGS="--job pretrain-p5"   go-live checks against the live cluster
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CHECKOV_VENV := .venv-checkov
# The policy pack's environment, where PulumiPolicy.yaml points the engine (virtualenv: venv).
POLICY_VENV := policy/venv
STACK ?= dev

.PHONY: venv torch-cpu plan plans plan-diff cost test lint pytest policy-venv policy-test policy bench clean verify

# PyTorch's own index serves the CPU build of the torch requirements-dev.txt pins (as
# <version>+cpu, which `torch==<version>` accepts); PyPI's wheel of it is the CUDA build, with
# several GB of nvidia-* wheels. GitHub-hosted CI runs this before `make test`; locally pip finds
# the CPU wheel in the local wheel cache and nothing calls it.
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu

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

policy-venv: $(POLICY_VENV)/.installed

# Only torch (and what it depends on) comes from that index: everything else stays on PyPI.
torch-cpu:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --index-url $(TORCH_CPU_INDEX) \
		"$$(grep -E '^torch==' requirements-dev.txt)"

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
plan: $(BYTECODE)
	$(PY) scripts/plan.py $(if $(filter bootstrap,$(STACK)),--project bootstrap) --stack $(STACK)

plans: $(BYTECODE)
	$(PY) scripts/plan.py --all --project . --project bootstrap

plan-diff: $(BYTECODE)
	scripts/plan-diff $(BASE)

cost: $(BYTECODE)
	$(PY) scripts/cost.py --stack $(STACK) $(ARGS)

lint: $(VENV)/.dev $(POLICY_VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/basedpyright
	$(VENV)/bin/basedpyright -p policy
	$(PY) scripts/config_docs.py --check
	$(VENV)/bin/shellcheck .ci/run $(wildcard scripts/*.sh scripts/build-image scripts/plan-diff scripts/deploy-environment scripts/check-branch-tip scripts/check-runner-tools trainer/*.sh)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/actionlint
	@if [ -f trainer/Dockerfile ]; then $(VENV)/bin/hadolint trainer/Dockerfile; fi

# $(CURDIR) quoted: the checkout's path may hold a space (tests/test_delivery_scripts.py).
pytest: $(VENV)/.dev $(CHECKOV_VENV)/.installed $(BYTECODE)
	CHECKOV="$(CURDIR)/$(CHECKOV_VENV)/bin/checkov" $(PY) -m pytest

# The pack's tests read the plans (the engine's inputs) that `plans` writes with the program's venv.
policy-test: plans $(POLICY_VENV)/.installed
	$(POLICY_VENV)/bin/python -m pytest policy/tests

policy: plans $(POLICY_VENV)/.installed
	$(POLICY_VENV)/bin/python policy/check_plans.py $(patsubst stacks/Pulumi.%.yaml,build/%,$(sort $(wildcard stacks/Pulumi.*.yaml))) \
		$(patsubst bootstrap/Pulumi.%.yaml,build/%,$(wildcard bootstrap/Pulumi.*.yaml))

test: lint pytest policy-test

verify: $(VENV)/.verify
	$(PY) scripts/verify --stack $(STACK) $(ARGS)

# Speed goals as ratios against a floor measured in the same run (never timed tests). The plan
# benches import offline/ from the repository root (run as modules); the trainer bench imports the
# trainer's packages from the path the trainer image gives them (PYTHONPATH).
bench: $(VENV)/.dev $(BYTECODE)
	$(PY) -m bench.plan_bench
	PYTHONPATH="$(CURDIR)/trainer" $(PY) bench/trainer_bench.py

clean:
	rm -rf build $(VENV) $(CHECKOV_VENV) $(POLICY_VENV) .pytest_cache .ruff_cache
