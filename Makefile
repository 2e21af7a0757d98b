# Thin wrapper over CMake. `make run`: set up, build, run the suite on the CPU backend with
# 4 local MPI ranks, write results and plots. `make test`: set up, build, pass the tests.
# `make sim`: the SMPI build of the MPI benchmarks (SimGrid, build-sim/; scripts/envs/simulate.py).
# Each target sets up only what it needs (scripts/setup.sh: apt-get as root, otherwise a check
# and the ways to get what is missing without root; docs/CLUSTER.md). `make build TARGETS=sp_tp`
# builds only the executables named.
BUILD ?= build
SIM_BUILD ?= build-sim
SIM_TARGETS = sp_tp ring_attention ulysses moe mesh pipeline harness_overhead
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
TARGETS ?=

# The suite's Python tools run as `.venv/bin/python -m scripts COMMAND` (the same as
# .venv/bin/suite COMMAND): from this checkout, whichever checkout installed .venv/bin/suite.
# What scripts/setup.sh prepares: the goals asked (`make setup` alone: everything).
SETUP_FOR = $(or $(filter build sim run test,$(MAKECMDGOALS)),$(if $(filter setup,$(MAKECMDGOALS)),all,build))
# The tests: built where GoogleTest is found (AUTO), required by `make test` (ON).
TESTS = $(if $(filter test,$(MAKECMDGOALS)),ON,AUTO)
# CMake and ctest: the wheel's in .venv once scripts/setup.sh put it there (the system's was too
# old); expanded when a recipe runs, so after setup.
CMAKE = $(shell test -x .venv/bin/cmake && echo $(CURDIR)/.venv/bin/cmake || echo cmake)
CTEST = $(shell test -x .venv/bin/ctest && echo $(CURDIR)/.venv/bin/ctest || echo ctest)
# A configure that stops (a dependency missing) leaves no cache behind: the next one searches
# afresh, e.g. with the modules loaded since, instead of tripping over what this one cached.
CONFIGURE_FAILED = { rm -f $(1)/CMakeCache.txt; echo "make: configure failed: $(1)/CMakeCache.txt removed, the next configure starts afresh" >&2; exit 1; }

.PHONY: all setup build sim run baseline test docs-check clean format

all: build

setup:
	SUITE_ENABLE_CUDA=$(if $(findstring SUITE_ENABLE_CUDA=OFF,$(CMAKE_ARGS)),OFF,ON) scripts/setup.sh $(SETUP_FOR)

build: setup
	$(CMAKE) -S . -B $(BUILD) -DSUITE_PYTHON=$(CURDIR)/.venv/bin/python -DSUITE_BUILD_TESTS=$(TESTS) \
	  $(CMAKE_ARGS) || $(call CONFIGURE_FAILED,$(BUILD))
	$(CMAKE) --build $(BUILD) -j $(JOBS) $(if $(TARGETS),--target $(TARGETS))

# The CPU backend compiled with smpicxx (no CUDA, no tests): every timer reads SMPI's clock.
sim: setup
	CC=smpicc CXX=smpicxx $(CMAKE) -S . -B $(SIM_BUILD) -DSUITE_SMPI=ON -DMPI_C_COMPILER=smpicc \
	  -DSUITE_PYTHON=$(CURDIR)/.venv/bin/python || $(call CONFIGURE_FAILED,$(SIM_BUILD))
	$(CMAKE) --build $(SIM_BUILD) -j $(JOBS) --target $(SIM_TARGETS)

# Ends with the verdict of every results file against this machine's baselines; STRICT=1
# makes a regression fail it.
run: build sim
	BUILD=$(BUILD) SIM_BUILD=$(SIM_BUILD) scripts/run_suite.sh

# Files the latest run (or RUN=results/<stamp>) as this machine's baselines, every results
# file of it, replacing the baselines of the same names (results/baselines/<system>/<file>).
baseline:
	@run="$${RUN:-$$(ls -d results/[0-9]*Z/ 2>/dev/null | tail -n 1)}"; \
	if [ -z "$$run" ]; then echo "make baseline: no run under results/ (make run makes one)" >&2; exit 2; fi; \
	echo "filing $$run as the baselines of this machine:"; \
	.venv/bin/python -m scripts baselines add "$$run" --force

# ctest counts a skipped test as passed: test_counts.py then says how many ran, how many
# skipped and why (from ctest's JUnit report), and what each failed test printed last. A failed
# test is run once more, alone, to tell a failure from a clash with the tests beside it (its
# line comes last); ctest's exit status from the first run stays make's.
test: build sim
	$(CTEST) --test-dir $(BUILD) --output-on-failure -j $(JOBS) --output-junit ctest-junit.xml; \
	status=$$?; \
	if [ $$status -ne 0 ]; then $(CTEST) --test-dir $(BUILD) --rerun-failed >$(BUILD)/ctest-rerun.log 2>&1; fi; \
	.venv/bin/python -m scripts test-counts $(BUILD)/ctest-junit.xml; \
	if [ $$status -ne 0 ]; then echo "the failed tests, rerun alone: $$(grep -E 'tests passed' \
	  $(BUILD)/ctest-rerun.log || echo 'no summary') ($(BUILD)/ctest-rerun.log; the first run decides)"; fi; \
	exit $$status

# Reruns the simulations behind the tables of simulated figures in docs/ and
# fails when a published figure drifted (scripts/studies/docs_check.py; about 2 minutes on 2 cores).
docs-check: build sim
	.venv/bin/python -m scripts docs-check --sim-build $(SIM_BUILD) --model $(BUILD)/bin/model

format:
	git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(SIM_BUILD)
