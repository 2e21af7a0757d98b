# Thin wrapper over CMake. `make run`: set up, build, run the suite on the CPU backend with
# 4 local MPI ranks, write results and plots. `make test`: set up, build, pass the tests.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all setup build run test clean format

all: build

setup:
	scripts/setup.sh

build: setup
	cmake -S . -B $(BUILD) -DSUITE_PYTHON=$(CURDIR)/.venv/bin/python $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)

run: build
	BUILD=$(BUILD) scripts/run_suite.sh

# ctest counts a skipped test as passed: test_counts.py then says how many ran, how many
# skipped and why (from ctest's JUnit report); ctest's exit status stays make's.
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --output-junit ctest-junit.xml; \
	status=$$?; .venv/bin/python scripts/test_counts.py $(BUILD)/ctest-junit.xml; exit $$status

format:
	git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD)
