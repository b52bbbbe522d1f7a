# Two commands on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORE_STAMP := $(VENV)/.installed-core
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: demo test lint sysdeps clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

# The demo needs only the package; the tests also need the dev extra (torch, onnx, ...),
# which more than doubles the set-up time of a fresh clone.
$(CORE_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $(CORE_STAMP)

$(DEV_STAMP): $(CORE_STAMP)
	$(BIN)/pip install -q -e '.[dev]'
	touch $(DEV_STAMP)

# System packages the tests need (ARM toolchain, QEMU, Fashion-MNIST), installed when we are
# root and they are missing; without root the tests that need them skip and say how to install.
sysdeps:
	@bash scripts/install-sysdeps.sh

demo: $(CORE_STAMP)
	$(BIN)/mcutrain demo

test: $(DEV_STAMP) sysdeps
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/python -m pytest -q --durations=15

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests benchmarks

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
