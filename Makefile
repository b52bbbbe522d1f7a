# Two commands on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint sysdeps bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# System packages the tests need (ARM toolchain, QEMU, Fashion-MNIST), installed when we are
# root and they are missing; without root the tests that need them skip and say how to install.
sysdeps:
	@bash scripts/install-sysdeps.sh

demo: $(STAMP)
	$(BIN)/mcutrain demo

test: $(STAMP) sysdeps
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
