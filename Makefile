# Two entry points: `make run` (service on embedded defaults) and `make test` (all tests).
# Both create .venv and install the project into it on first use.
VENV ?= .venv
PY := $(VENV)/bin/python

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

.PHONY: install run test bench
install: $(VENV)/.installed

run: $(VENV)/.installed
	$(VENV)/bin/dra-bridge serve

test: $(VENV)/.installed
	$(PY) -m pytest -q

bench: $(VENV)/.installed
	$(PY) bench/mutate.py
	$(PY) bench/validate.py
