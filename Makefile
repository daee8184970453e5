# Thin wrapper over CMake. `make demo` and `make check` are all a fresh Debian machine
# needs: both install missing packages first (scripts/setup.sh), then configure and build.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all setup setup-check build demo check check-narrow check-asan check-valgrind check-slow fuzz bench \
        results format clean help

all: build

help:
	@echo "make demo    install what is missing, build, run configs/quickstart.yaml, print the summary"
	@echo "make check   install what is missing, build, run the test suite but its slow tests"
	@echo "             (+ valgrind run), the CPU suite under ASan/UBSan, each fuzz target 60 s"
	@echo "make fuzz [FUZZ_SECONDS=60]  libFuzzer targets (clang): run each, report findings"
	@echo "make check-asan / check-valgrind / check-narrow  one part of make check alone"
	@echo "             (check-narrow: the narrow-labelled tests on the AVX2 path, AVX-512 off)"
	@echo "make check-slow  install what is missing, build, run the slow tests only (dieharder on the epsilon generators, ~4 min)"
	@echo "make bench   build and run the benchmarks (MLP, LeNet: step time per level vs fast, hashing share; BNN: philox, lfsr vs stored, epsilon memory)"
	@echo "make results [PARTS=\"controls dist\"]  regenerate the CPU part of results/ with the commands in"
	@echo "             each results/cpu/*/README.md (scripts/results.sh --list; many minutes; not in make check)"
	@echo "make format  apply the house style (.clang-format) to every C and CUDA source; make check checks it"
	@echo "make clean   remove the build folders"

setup:
	@bash scripts/setup.sh

# The checking tools too (clang + its runtime libraries for libFuzzer, valgrind).
setup-check:
	@bash scripts/setup.sh --check

$(BUILD)/CMakeCache.txt: | setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDETRAIN_MPI=ON $(CMAKE_ARGS)

build: setup $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The quickstart (fast and portable, 3 replicas each, 2 threads), the same config at 1
# thread for 50 steps and the table of the two (fast may or may not part there: that depends
# on the CPU, and the demo says which), then the committed portable references of other
# machines (an AMD EPYC, the H100) reproduced here by `detrain reproduce` (scripts/demo.sh).
demo: build
	bash scripts/demo.sh $(BUILD)

# The house style first (scripts/format.sh --check: .clang-format, clang-format 14); then
# everything but the `slow` label (make check-slow), the valgrind run included; then the
# CPU suite under ASan/UBSan, then each fuzz target for 60 s.
check: setup-check build
	bash scripts/format.sh --check
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE slow
	$(MAKE) check-narrow
	$(MAKE) check-asan
	$(MAKE) fuzz FUZZ_SECONDS=60

# The narrow path an AVX2 machine takes, on this machine: the tests labelled `narrow` (the
# ops, the models, explain, reproduce of the committed references: portable's digests must
# not change) again with detrain's AVX-512 kernels off (DETRAIN_CPU_ISA=avx2) and OpenBLAS
# and oneDNN held to AVX2. On a CPU without AVX-512 it is the same path as the first run.
NARROW_ENV = DETRAIN_CPU_ISA=avx2 OPENBLAS_CORETYPE=Haswell ONEDNN_MAX_CPU_ISA=AVX2
check-narrow: build
	cd $(BUILD) && $(NARROW_ENV) ctest --output-on-failure -j $(JOBS) -L narrow

# The slow tests (dieharder on the raw generator words; skipped without dieharder).
check-slow: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L slow

# The CPU suite again (every label but gpu, slow, valgrind, committed and tooling), built with
# AddressSanitizer + UndefinedBehaviorSanitizer; the fuzz regressions replay there too.
# `committed` marks the cases that hold this build's bits against committed files (the
# CPU references, the GPU plan's, reproduce of every committed result): the bits are
# checked in the main and narrow suites, and their code paths run under the sanitizers in
# the other cases of the same modules (some two minutes of CPU time saved there).
# `tooling` marks the cases that check the source tree or run the scripts alone (house.*,
# the bash, Python and CMake checks of scripts.*): no detrain code for a sanitizer to watch.
# ASAN_EXCLUDE: tests to leave out there (a ctest -E regex; none by default). The learning
# tests run shortened in this build (DT_SANITIZED in tests/check.h): the whole CPU suite runs.
ASAN_EXCLUDE ?=
check-asan: setup
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDETRAIN_SANITIZE=ON \
	      -DDETRAIN_CUDA=OFF -DDETRAIN_MPI=OFF $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) -LE 'gpu|slow|valgrind|committed|tooling' \
	    $(if $(ASAN_EXCLUDE),-E '$(ASAN_EXCLUDE)')

# One short training run under valgrind --error-exitcode=1 (also part of make check).
check-valgrind: setup-check build
	cd $(BUILD) && ctest --output-on-failure -L valgrind

# libFuzzer (clang) on the config loader, the IDX reader, the trace/tensors readers and the
# checkpoint reader: FUZZ_SECONDS each, side by
# side, over copies of fuzz/corpus/ (fuzz/run.sh); a finding fails and names its file.
fuzz: setup-check
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	      -DDETRAIN_FUZZ=ON -DDETRAIN_CUDA=OFF -DBUILD_TESTING=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_config fuzz_idx fuzz_trace fuzz_checkpoint
	bash fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) config idx trace checkpoint

bench: build
	@bash scripts/setup.sh --bench
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
	./$(BUILD)/detrain bench configs/bnn-local.yaml --steps 40 --warmup 4 --set 'policies=[fast, portable]'
	@# the Bayesian MLP's two estimators against a plain MLP of its widths (target <= 3x)
	DETRAIN=./$(BUILD)/detrain bash scripts/bnn_cost.sh | grep -v '^round'
	DETRAIN=./$(BUILD)/detrain bash scripts/ranks.sh configs/dist.yaml $(BUILD)/bench-dist 1 2
	@# PyTorch on every model, interleaved rounds, medians and ratios (exit 77: no PyTorch)
	DETRAIN=./$(BUILD)/detrain bash scripts/vs_torch.sh > $(BUILD)/vs-torch.txt; \
	  rc=$$?; if [ $$rc -eq 0 ]; then cat $(BUILD)/vs-torch.txt | grep -v '^round'; \
	  elif [ $$rc -eq 77 ]; then echo "bench: no PyTorch comparison (scripts/setup.sh --bench makes .venv-torch/ with pip's)"; \
	  else exit $$rc; fi

# The CPU part of results/ again: scripts/results.sh runs the commands each
# results/cpu/*/README.md gives and puts the files back (PARTS: only those parts; see
# scripts/results.sh --list). Many minutes on 2 cores; not part of `make check` or CI. The
# GPU part (results/<gpu>/) is made on a GPU machine by scripts/gpu_session.sh.
PARTS ?=
results: build
	DETRAIN=./$(BUILD)/detrain bash scripts/results.sh $(PARTS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)

format: setup-check
	bash scripts/format.sh
