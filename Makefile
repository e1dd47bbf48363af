# blackwell.sglang -- developer and CI entry points. `make help` lists the targets.
# Everything runs as root on a Debian 12 / Ubuntu machine; `make test` and `make sandbox` do all of their own set-up.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

REPO        := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
PYTHON      ?= python3
VENV        ?= $(REPO)/.venv
BIN         := $(VENV)/bin
CACHE       := $(REPO)/.cache
export PATH := $(BIN):$(PATH)
export ANSIBLE_FORCE_COLOR ?= 0
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# Wheelhouse with a CPU torch wheel (this lab's machines have one in /opt/wheels); torch is needed by the unit tests
# of the FP4 numerics. DEV_TORCH: auto (local wheel if present, else torch from PyPI), wheelhouse, pypi, none.
BLACKWELL_WHEELHOUSE ?= /opt/wheels
export BLACKWELL_WHEELHOUSE
DEV_TORCH   ?= auto
TORCH_VERSION ?= 2.13.0

# Molecule scenarios in the order the suite starts them, MOLECULE_JOBS at a time (longest first, so the slow ones
# overlap the quick ones). Scenarios listed here that do not exist yet are reported and skipped; scenario
# directories missing from MOLECULE_ALL make `make molecule` fail (forgotten ones).
# `make molecule MOLECULE_SCENARIOS="a b"` runs a subset; MOLECULE_JOBS=1 runs them one after another.
MOLECULE_ALL       := fleet site first_run gateway sglang_service flashinfer sgl_kernel_sm120 cuda_toolchain sglang_source \
                      fp4_probe sglang_benchmark torch_nightly preflight sglang_release monitoring sglang_model default
# Scenarios to leave out of one run (still listed above): `make test MOLECULE_OPTIONAL=fleet` skips the fleet rollout
# (three hosts, the longest scenario; its run time: docs/benchmarks.md). By default every scenario runs.
MOLECULE_OPTIONAL  ?=
MOLECULE_SCENARIOS ?= $(filter-out $(MOLECULE_OPTIONAL),$(MOLECULE_ALL))
MOLECULE_JOBS      ?= 3
export MOLECULE_JOBS
MOLECULE_TIMEOUT   ?= 3600
MOLECULE_ARGS      ?=
PYTEST_ARGS        ?=
# pytest-xdist workers for make unit (0 = no workers, one process). One more than the cores: many tests wait on their
# ansible-playbook runs (async polls, a server's readiness), and a third worker on 2 cores took the step from 986 to
# 846 s with the machine 80 -> 88% busy (docs/benchmarks.md). worksteal: an idle worker takes queued tests from a busy
# one, so the minute-long tests do not leave one core idle at the end.
PYTEST_JOBS        ?= $(shell echo $$(( $$(nproc) + 1 )))
PYTEST_DIST        ?= worksteal
INVENTORY          ?= inventories/sandbox
# The sandbox image tag: make image builds it, Molecule (molecule/_shared/config.yml) and make sandbox-up use it.
BLACKWELL_SANDBOX_IMAGE ?= localhost/blackwell-sandbox:bookworm
export BLACKWELL_SANDBOX_IMAGE
SANITY_ARGS        ?=
# The pinned upstream sources (the SGLang trees of both pins and the kernel's FetchContent dependencies, listed with
# their sha256 in tests/sandbox/upstream.lock.json): the project's bundle ../shared/upstream where it exists (read in
# place; GitHub is never asked), else .cache/upstream, which `make upstream` fills from GitHub archives and verifies.
# Exported: tests/sandbox/build_sglang_mirror.sh and the unit tests read it.
BLACKWELL_UPSTREAM ?= $(if $(wildcard $(REPO)/../shared/upstream/manifest.json),$(abspath $(REPO)/../shared/upstream),$(CACHE)/upstream)
export BLACKWELL_UPSTREAM
# the command `make upstream` names when it fails (make test runs its steps as sub-makes, which inherit it)
BLACKWELL_FETCH_FOR ?= make $(or $(MAKECMDGOALS),help)
export BLACKWELL_FETCH_FOR
SANITY_DIR         := $(CACHE)/ansible_collections/blackwell/sglang
SANITY_VENV        := $(CACHE)/sanity-venv

.PHONY: help deps host venv upstream image mirror lint package sanity unit molecule test sandbox sandbox-up sandbox-down clean distclean

help: ## Show this help
	@echo "blackwell.sglang make targets (run as root):"
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'
	@echo
	@echo "Variables: MOLECULE_SCENARIOS=\"$(strip $(MOLECULE_SCENARIOS))\""
	@echo "           DEV_TORCH=$(DEV_TORCH) BLACKWELL_WHEELHOUSE=$(BLACKWELL_WHEELHOUSE) INVENTORY=$(INVENTORY)"
	@echo "           MOLECULE_ARGS, PYTEST_ARGS, SANITY_ARGS: extra arguments; KEEP_GOING=1 (make test)"

deps: host venv ## Host prep (podman, runc, debootstrap) + .venv from requirements-dev.txt

host: ## Prepare this host for the podman sandbox (tests/sandbox/setup-host.sh, idempotent)
	bash tests/sandbox/setup-host.sh

venv: $(VENV)/.deps-stamp ## Create/refresh .venv (only when requirements-dev.txt, tests/requirements.yml or the zipimport hook changed)

$(VENV)/.deps-stamp: requirements-dev.txt tests/requirements.yml tests/sandbox/blackwell_zipimport_cache.py | host
	@echo "== venv $(VENV) ($$($(PYTHON) --version))"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	timeout 1800 $(BIN)/pip install --progress-bar on -r requirements-dev.txt
	@# zipimport's compiles kept on disk for the unit tests' module runs (their hosts run this venv's python; the
	@# module docstring says why and what it changes); the sandbox image has the same hook (build-image.sh)
	sp=$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
	  cp tests/sandbox/blackwell_zipimport_cache.py "$$sp/"; \
	  echo "import blackwell_zipimport_cache; blackwell_zipimport_cache.install('$(VENV)/zipimport-cache')" \
	    > "$$sp/blackwell_zipimport_cache.pth"
	@case "$(DEV_TORCH)" in \
	  none) echo "== torch: not installed (DEV_TORCH=none): torch-based unit tests will be reported as skipped";; \
	  *) if $(BIN)/python -c 'import torch' 2>/dev/null; then \
	       echo "== torch $$($(BIN)/python -c 'import torch; print(torch.__version__)') already in the venv"; \
	     elif [[ "$(DEV_TORCH)" != pypi ]] && compgen -G "$(BLACKWELL_WHEELHOUSE)/torch-$(TORCH_VERSION)*.whl" >/dev/null; then \
	       echo "== torch $(TORCH_VERSION) from the wheelhouse $(BLACKWELL_WHEELHOUSE)"; \
	       timeout 1800 $(BIN)/pip install --progress-bar on --find-links $(BLACKWELL_WHEELHOUSE) "torch==$(TORCH_VERSION)"; \
	     elif [[ "$(DEV_TORCH)" == wheelhouse ]]; then \
	       echo "no torch-$(TORCH_VERSION) wheel in $(BLACKWELL_WHEELHOUSE) (DEV_TORCH=wheelhouse)" >&2; exit 1; \
	     else \
	       echo "== torch $(TORCH_VERSION) from PyPI (no local wheel; large download)"; \
	       timeout 2400 $(BIN)/pip install --progress-bar on "torch==$(TORCH_VERSION)"; \
	     fi;; \
	esac
	@# the test-only collections (tests/requirements.yml) come with the pinned `ansible` package: check, never download
	@for c in $$($(BIN)/python -c 'import yaml; print(*(c["name"] for c in yaml.safe_load(open("tests/requirements.yml"))["collections"]))'); do \
	  $(BIN)/ansible-galaxy collection list "$$c" 2>/dev/null | grep -E "^$$c " \
	    || { echo "collection $$c missing: the ansible package should bring it" >&2; exit 1; }; \
	done
	touch $@

image: host ## Build the sandbox image $BLACKWELL_SANDBOX_IMAGE (skipped when its recipe hash, build-image.sh included, matches)
	SANDBOX_IMAGE=$(BLACKWELL_SANDBOX_IMAGE) bash tests/sandbox/build-image.sh

upstream: ## The pinned upstream sources: the bundle ($BLACKWELL_UPSTREAM) checked, or fetched into .cache/upstream
	@command -v $(PYTHON) >/dev/null || { echo "$(BLACKWELL_FETCH_FOR): $(PYTHON) not found: apt-get install python3" >&2; exit 1; }
	$(PYTHON) tests/sandbox/fetch_upstream.py

mirror: venv upstream ## Build the local SGLang git mirror .cache/mirror/sglang.git (skipped when up to date)
	@# make upstream has run: the sources are there, so their absence is an error here, not a skip
	SGLANG_MIRROR_REQUIRE_UPSTREAM=$${SGLANG_MIRROR_REQUIRE_UPSTREAM:-1} bash tests/sandbox/build_sglang_mirror.sh

lint: venv ## ansible-lint (production profile, .ansible-lint) + yamllint + the private-variable rule + make package
	@echo "== yamllint"
	$(BIN)/yamllint --strict .
	@echo "== ansible-lint"
	$(BIN)/ansible-lint
	@echo "== private-variable rule (tests/lint/private_vars.py: __<role>_<name>)"
	$(BIN)/python tests/lint/private_vars.py
	@$(MAKE) --no-print-directory package

package: venv ## Build the tarball, check what it ships, install it into an empty path, syntax-check its playbooks by FQCN
	@echo "== package (tests/package/check_package.py)"
	timeout 300 $(BIN)/python tests/package/check_package.py

sanity: venv ## ansible-test sanity on a copy at .cache/ansible_collections/blackwell/sglang (Python 3.11, own venv)
	@# ansible-test --venv/--docker need ci-files.testing.ansible.com or a registry (unreachable here), so it runs
	@# --local in a venv of its own (.cache/sanity-venv: its pinned linters must not disturb .venv).
	test -x $(SANITY_VENV)/bin/ansible-test || { $(PYTHON) -m venv $(SANITY_VENV) && \
	  timeout 1800 $(SANITY_VENV)/bin/pip install --progress-bar on "$$(grep -E '^ansible-core==' requirements-dev.txt)"; }
	@pipv=$$(grep -oE "pip='[0-9.]+'" $(SANITY_VENV)/lib/python3*/site-packages/ansible_test/_internal/python_requirements.py | grep -oE '[0-9.]+'); \
	cache=$$HOME/.ansible/test/cache/get_pip_$${pipv//./_}.py; \
	if ! cmp -s tests/sandbox/ansible-test-get-pip.py "$$cache"; then mkdir -p "$${cache%/*}" && cp tests/sandbox/ansible-test-get-pip.py "$$cache" && \
	  echo "== ansible-test pip $$pipv bootstrap: ensurepip + PyPI stand-in at $$cache"; fi
	@# tests/fixtures/ is left out: it holds recorded tool output and files shaped like third-party code on purpose
	@# (upstream's bare `except:` in flash_attn.py is what the patch module must find), not code of this collection.
	@echo "== copying the collection to $(SANITY_DIR)"
	rm -rf $(SANITY_DIR) && mkdir -p $(SANITY_DIR)
	git ls-files -z --cached --others --exclude-standard \
	  | grep -zvE '^(collections/|\.cache/|\.venv/|\.config/|\.ansible/|tests/output/|tests/fixtures/)' \
	  | xargs -0 -I{} sh -c 'test -e "{}" && printf "%s\0" "{}" || true' \
	  | tar --null -T - -cf - | tar -xf - -C $(SANITY_DIR)
	@# its own git index: ansible-test lists files with git, and the enclosing checkout ignores .cache/
	cd $(SANITY_DIR) && git init -q && git add -A
	cd $(SANITY_DIR) && PATH=$(SANITY_VENV)/bin:$$PATH timeout 2400 $(SANITY_VENV)/bin/ansible-test sanity \
	  --local --requirements --python 3.11 --color no $(SANITY_ARGS)

unit: venv ## pytest tests/unit on PYTEST_JOBS workers (pytest-xdist, cores + 1; no tests collected = failure)
	@rc=0; $(BIN)/pytest tests/unit -n $(PYTEST_JOBS) $(if $(filter-out 0,$(PYTEST_JOBS)),--dist $(PYTEST_DIST)) --durations=30 $(PYTEST_ARGS) || rc=$$?; \
	if [[ $$rc -eq 5 ]]; then echo "pytest collected no tests (exit 5): that is a failure here" >&2; fi; \
	exit $$rc

molecule: venv image mirror ## Every scenario in MOLECULE_SCENARIOS, in order, sharing one image + pip cache (timed)
	@MOLECULE_ALL="$(strip $(MOLECULE_ALL))" bash molecule/_shared/run-scenarios.sh $(MOLECULE_TIMEOUT) "$(MOLECULE_ARGS)" $(MOLECULE_SCENARIOS)

test: ## THE test suite (CI): upstream deps, then lint sanity unit beside molecule (KEEP_GOING=1, SERIAL=1: tests/run-suite.sh)
	@MAKE="$(MAKE)" KEEP_GOING="$(KEEP_GOING)" SERIAL="$(SERIAL)" bash tests/run-suite.sh

sandbox: upstream deps image mirror sandbox-up ## The main job: sandbox container + ansible-playbook site.yml -i inventories/sandbox
	timeout 5400 $(BIN)/ansible-playbook site.yml -i $(INVENTORY)

sandbox-up: venv image ## Create the sandbox container(s) of INVENTORY and wait for systemd (reached over SSH)
	@# the SSH client key of the sandbox connection (.cache/sandbox-ssh) + a stale image without sshd named
	bash tests/sandbox/ssh-setup.sh $(BLACKWELL_SANDBOX_IMAGE) >/dev/null
	$(BIN)/ansible-playbook playbooks/sandbox_up.yml -i $(INVENTORY) -e sandbox_image=$(BLACKWELL_SANDBOX_IMAGE)

sandbox-down: venv ## Remove the sandbox container(s) of INVENTORY
	$(BIN)/ansible-playbook playbooks/sandbox_down.yml -i $(INVENTORY)

clean: ## Remove sandbox/molecule containers and test outputs (keeps .venv, image, pip cache, mirror, upstream sources)
	-test -x $(BIN)/ansible-playbook && $(BIN)/ansible-playbook playbooks/sandbox_down.yml -i $(INVENTORY)
	-command -v podman >/dev/null && podman ps -aq --filter label=owner=molecule | xargs -r podman rm -f
	rm -rf $(CACHE)/ansible_collections $(CACHE)/facts $(CACHE)/sandbox-image tests/output

distclean: clean ## clean + remove .venv, all of .cache (pip cache, mirror, fetched upstream sources) and the sandbox image
	-command -v podman >/dev/null && podman rmi -f $(BLACKWELL_SANDBOX_IMAGE)
	rm -rf $(VENV) $(CACHE)
