# Thin wrapper over CMake. `make demo` and `make check` are all a fresh Debian machine
# needs: both install missing packages first (scripts/setup.sh), then configure and build.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all setup build demo check check-asan check-slow bench clean help

all: build

help:
	@echo "make demo    install what is missing, build, run configs/quickstart.yaml, print the summary"
	@echo "make check   install what is missing, build, run the test suite but its slow tests (+ ASan/UBSan build)"
	@echo "make check-slow  install what is missing, build, run the slow tests only (dieharder on the epsilon generators, ~4 min)"
	@echo "make bench   build and run the benchmarks (MLP, LeNet: step time per level vs fast, hashing share; BNN: philox, lfsr vs stored, epsilon memory)"
	@echo "make clean   remove the build folders"

setup:
	@bash scripts/setup.sh

$(BUILD)/CMakeCache.txt: | setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)

build: setup $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/detrain run configs/quickstart.yaml --out results/quickstart

# Everything but the `slow` label (make check-slow).
check: build check-asan
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE slow

# The slow tests (dieharder on the raw generator words; skipped without dieharder).
check-slow: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L slow

# The unit tests again, built with AddressSanitizer + UndefinedBehaviorSanitizer.
check-asan: setup
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDETRAIN_SANITIZE=ON \
	      -DDETRAIN_CUDA=OFF $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) -L unit

bench: build
	./$(BUILD)/detrain bench configs/quickstart.yaml --steps 100 --warmup 10 \
	    --set 'policies=[fast, run_to_run, portable]'
	./$(BUILD)/detrain bench configs/quickstart.yaml --steps 100 --warmup 10 --set train.batch=64 \
	    --set 'policies=[fast, run_to_run, portable]'
	./$(BUILD)/detrain bench configs/cpu_controls.yaml --steps 40 --warmup 5
	./$(BUILD)/detrain bench configs/lenet.yaml --steps 100 --warmup 10 \
	    --set 'policies=[fast, run_to_run, portable]'
	./$(BUILD)/detrain bench configs/lenet.yaml --steps 100 --warmup 10 \
	    --set model.overlap_pool=true --set 'policies=[fast, run_to_run, portable]'
	./$(BUILD)/detrain bench configs/bnn.yaml --steps 40 --warmup 4 --baseline first

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
