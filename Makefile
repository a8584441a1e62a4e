# Two entry points: `make run` (service on embedded defaults) and `make test` (all tests).
# Both create .venv and install the project into it on first use.
VENV ?= .venv
PY := $(VENV)/bin/python

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

.PHONY: install run test e2e bench
install: $(VENV)/.installed

run: $(VENV)/.installed
	$(VENV)/bin/dra-bridge serve

test: $(VENV)/.installed
	$(PY) -m pytest -q

# A real control plane from upstream Kubernetes (built with Go, cached): see README "Tests".
e2e: $(VENV)/.installed
	$(PY) -c 'from tests.e2e.cluster import build; print("control plane binaries:", build())'
	DRA_BRIDGE_E2E=1 $(PY) -m pytest -q tests/e2e

bench: $(VENV)/.installed
	$(PY) bench/mutate.py
	$(PY) bench/validate.py
