# Two entry points: `make run` (service on embedded defaults) and `make test` (all tests).
# Both create .venv and install the project into it on first use.
VENV ?= .venv
PY := $(VENV)/bin/python

# `make run` installs the service's packages only (a 250 MB venv); `make test` adds the test
# tools (400 MB).
$(VENV)/.installed-run: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@ $(VENV)/.installed-run

.PHONY: install run test lint e2e e2e-plane e2e-matrix bench lock image wheels-arm64
install: $(VENV)/.installed

run: $(VENV)/.installed-run
	$(VENV)/bin/dra-bridge serve --demo

# First the Go programs the tests run, each said (the first run builds them: minutes on 2 cores).
test: $(VENV)/.installed
	$(PY) -m tests.prebuild
	$(PY) -m pytest -q

# ruff (pyflakes, bugbear: pyproject.toml) over the code and tests; mypy over the typed packages.
TYPED = app/application app/cel app/dra app/migration app/policy
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check app tests bench
	$(VENV)/bin/mypy $(TYPED)

# A real control plane from upstream Kubernetes (built with Go, cached): see README "Tests".
# KUBE_VERSION=1.34.4 (a release tests/e2e/go.k1XX.mod pins) builds and runs that release instead.
export KUBE_VERSION
e2e: $(VENV)/.installed
	$(PY) -c 'from tests.e2e.cluster import build; print("control plane binaries:", build())'
	$(PY) -c 'from tests.helm.helmbin import build; print("helm:", build())'
	$(PY) -c 'from tests.e2e.kueue_manager import build; print("kueue:", build())'
	$(PY) -c 'from tests.e2e.kwok import build; print("kwok:", build())'
	$(PY) -m tests.e2e.realnode
	DRA_BRIDGE_E2E=1 $(PY) -m pytest -q tests/e2e

# The control-plane tier (no real nodes, KWOK, rollout or image) on the release KUBE_VERSION names:
# `make e2e-plane KUBE_VERSION=1.34.4`; `make e2e-matrix` runs it on every release tests/e2e pins.
E2E_PLANE = $(filter-out tests/e2e/test_kwok_nodes.py tests/e2e/test_real_nodes.py tests/e2e/test_rollout%.py \
	tests/e2e/test_nvidia_plugin_configs.py \
	tests/e2e/test_image.py,$(wildcard tests/e2e/test_*.py))
E2E_RELEASES ?= 1.34.4 1.35.4 1.36.3 1.37.2 1.38.0-beta.0
e2e-plane: $(VENV)/.installed
	$(PY) -c 'from tests.e2e.cluster import build, _release; print("control plane", _release() + ":", build())'
	$(PY) -c 'from tests.e2e.kueue_manager import build; print("kueue:", build())'
	DRA_BRIDGE_E2E=1 $(PY) -m pytest -q $(E2E_PLANE)

e2e-matrix: $(VENV)/.installed
	for release in $(E2E_RELEASES); do $(MAKE) e2e-plane KUBE_VERSION=$$release || exit 1; done

# The container image (image/build.sh): docker, or Debian's podman / buildah. IMAGE=name:tag;
# PYTHON_IMAGE=debian builds the Python base from Debian's packages where no registry answers.
image:
	./image/build.sh

# Every package the image installs has an arm64 wheel the lock's hashes accept (multi-arch builds).
wheels-arm64: $(VENV)/.installed
	rm -rf build/wheels-arm64
	$(PY) -m pip download -q --only-binary=:all: --no-deps --require-hashes --python-version 3.11 \
	  --implementation cp --abi cp311 --platform manylinux2014_aarch64 --platform manylinux_2_28_aarch64 \
	  -r requirements.lock -d build/wheels-arm64
	@echo "arm64 wheels: $$(ls build/wheels-arm64 | wc -l) of $$(grep -c '==' requirements.lock) packages"

bench: $(VENV)/.installed
	$(PY) bench/mutate.py
	$(PY) bench/validate.py

# The image's hash-pinned dependencies (Dockerfile), from pyproject.toml; review the diff.
LOCK_FLAGS := --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links
lock: $(VENV)/.installed
	$(PY) -m pip install -q 'pip-tools>=7.4,<8'
	PIP_FIND_LINKS= $(VENV)/bin/pip-compile -q $(LOCK_FLAGS) -o requirements.lock pyproject.toml
	PIP_FIND_LINKS= $(VENV)/bin/pip-compile -q $(LOCK_FLAGS) --all-build-deps --only-build-deps \
	  -o requirements-build.lock pyproject.toml
