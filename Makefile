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

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

format:
	git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD)
