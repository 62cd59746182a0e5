# tensore — one-command setup, tests, demo and benchmarks.  Needs only python3.11, gcc, make, perl.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
JOBS   ?= 2

.PHONY: setup test demo bench clean distclean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (set PYTHON=...)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

test: $(STAMP)
	$(PY) -m pytest -n $(JOBS) -q

demo: $(STAMP)
	$(PY) -m tensore.cli demo

bench: $(STAMP)
	mkdir -p build
	$(PY) -m tensore.bench -o build/bench.json

clean:
	rm -rf build .pytest_cache .hypothesis

distclean: clean
	rm -rf $(VENV) *.egg-info
