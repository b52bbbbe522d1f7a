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
# which more than doubles the set-up time of a fresh clone. pip is upgraded only when it is too
# old for editable installs of a pyproject package (21.3), and --no-compile skips byte-compiling
# every installed module up front (about half of the install's CPU time; Python compiles what
# it imports on first use).
PIP := $(BIN)/pip --disable-pip-version-check
$(CORE_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -c "import pip, sys; sys.exit(tuple(map(int, pip.__version__.split('.')[:2])) < (21, 3))" \
		|| $(PIP) install -q --upgrade pip
	$(PIP) install -q --no-compile -e .
	touch $(CORE_STAMP)

$(DEV_STAMP): $(CORE_STAMP)
	$(PIP) install -q -e '.[dev]'
	touch $(DEV_STAMP)

# System packages the demo and the tests need (ARM toolchain, QEMU, Fashion-MNIST), installed
# when we are root and they are missing; without root it prints the one command that installs
# them, and the demo's MCU stage / the tests that need them say they did not run.
sysdeps:
	@bash scripts/install-sysdeps.sh tests

demo: $(CORE_STAMP)
	@bash scripts/install-sysdeps.sh demo
	$(BIN)/mcutrain demo

# The suite on every core (pytest-xdist): whole modules go to one worker each (loadscope), so a
# module's shared fixture (a C library, a QEMU benchmark run) is built once, not once per worker;
# in collection order, where the modules of `slow` tests come first (tests/conftest.py).
# `make test TEST_WORKERS=0` runs it in this process, one test after another.
# --max-worker-restart 0: a worker that crashes is reported as a failure and not replaced, and the
# other worker finishes the run; xdist's loadscope scheduler re-queues a crashed worker's finished
# modules for its replacement and can then wait forever (pytest-xdist issue 1378): a CI run hung
# that way until its time limit, after a worker's segmentation fault.
TEST_WORKERS ?= auto
test: $(DEV_STAMP) sysdeps
	$(BIN)/ruff check src tests
	$(BIN)/python -m pytest -q --durations=15 -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder \
		--max-worker-restart 0

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
