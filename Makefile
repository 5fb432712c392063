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

.PHONY: serve test test-fast install install-dev clean qwen3-golden

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

# vLLM-Omni's speech route, for the test of the Qwen3-TTS GPU run's peer (benchmarks/vllm_omni_peer.py):
# its wheel without dependencies, in a folder of its own that nothing imports as a package; the test
# loads its request model from there. vLLM itself is a GPU install, never this venv's.
VLLM_OMNI_PEER := $(VENV)/peers/vllm-omni-0.26.0

$(VLLM_OMNI_PEER)/.installed: $(BIN)/python
	$(BIN)/pip install --quiet --no-deps --target $(VLLM_OMNI_PEER) vllm-omni==0.26.0
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev $(VLLM_OMNI_PEER)/.installed

serve: install
	$(BIN)/chorus serve --host $(HOST) --port $(PORT) --model $(MODEL)

# The slowest tests are listed at the end: the suite must stay under about 15 minutes on 2 cores.
test: install-dev
	$(BIN)/python -m pytest -q --durations=30 $(PYTEST_ARGS)

# The inner loop while working (about a minute): every test but the `slow` tier, which starts no
# server and no subprocess. The tier follows from where a test lives (tests/conftest.py): under a
# `live/` folder (it starts a server, a subprocess, a browser or Ray, or drives a real client over
# sockets), under a `long/` folder (seconds of work: benchmark quick runs, ASR, full-size parity),
# or using a fixture that starts a server (`server`, `joe_server`). A fast test that starts a
# process or a server fails, saying so; `make test` runs both tiers.
test-fast: install-dev
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

# Qwen3-TTS golden fixtures: the reference (qwen-tts 0.1.1) needs transformers 4.57.3, which the
# project's venv does not have, so it gets its own env. `--no-deps` skips its gradio/torchaudio pins;
# torchaudio has no build for torch 2.13 and only the 25 Hz tokenizer imports it (the script stubs it).
QWEN_REF_PYTHON ?= python3.11
QWEN_REF_VENV   ?= .venv-qwen-ref
QWEN_REF_BIN    := $(QWEN_REF_VENV)/bin

$(QWEN_REF_VENV)/.installed:
	$(QWEN_REF_PYTHON) -m venv $(QWEN_REF_VENV)
	$(QWEN_REF_BIN)/pip install --quiet --upgrade pip
	$(QWEN_REF_BIN)/pip install --quiet "$(TORCH_SPEC)"
	$(QWEN_REF_BIN)/pip install --quiet transformers==4.57.3
	$(QWEN_REF_BIN)/pip install --quiet --no-deps qwen-tts==0.1.1
	$(QWEN_REF_BIN)/pip install --quiet librosa sox onnxruntime einops safetensors tokenizers numpy soundfile
	touch $@

qwen3-golden: $(QWEN_REF_VENV)/.installed
	$(QWEN_REF_BIN)/python tests/model/qwen3_tts/golden/make_golden.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
