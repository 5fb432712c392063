# Two commands on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The CPU build of torch; installing it first keeps pip from pulling a multi-GB CUDA build
# to satisfy the package's looser `torch` requirement.
TORCH_SPEC ?= torch==2.13.0
HOST ?= 127.0.0.1
PORT ?= 8000
MODEL ?= joe
PYTEST_ARGS ?=

.PHONY: serve test test-fast install install-dev clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

serve: install
	$(BIN)/chorus serve --host $(HOST) --port $(PORT) --model $(MODEL)

test: install-dev
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# The inner loop while working (about a minute): every test but the `slow` tier, which starts no
# server and no subprocess. The tier follows from where a test lives (tests/conftest.py): under a
# `live/` folder (it starts a server, a subprocess, a browser or Ray, or drives a real client over
# sockets), under a `long/` folder (seconds of work: benchmark quick runs, ASR, full-size parity),
# or using a fixture that starts a server (`server`, `joe_server`). A fast test that starts a
# process or a server fails, saying so; `make test` runs both tiers.
test-fast: install-dev
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
