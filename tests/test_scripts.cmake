# tests/test_scripts.c: scripts/gpu_deps.sh, gpu_session.sh, cross_device.sh and
# bench_torch.py without a GPU or a network. e2e: cross_device.sh on short real CPU runs of
# the three models, bench_torch.py and torch_gpt.py (an exported GPT rebuilt) on the CPU
# (skipped without PyTorch). slow (make check-slow): the real Debian fetch, a build from the
# unpacked prefix alone and a short run (tests/gpu_deps_check.sh; skipped when apt cannot
# download).
# label tooling: cases that run the scripts (bash, Python, CMake, PyTorch) and no detrain
# code worth a sanitizer's look -- left out of make check-asan, which would only run them again.
dt_add_test(scripts LABELS unit tooling CASES bash_syntax python_syntax deps_install_fake
            session_continues_after_failures session_tests_stage_skips payload_fits session_kind
            torch_python_pick)
# (the plan's dry runs check every config the GPU plan uses with detrain run --dry-run)
dt_add_test(scripts LABELS unit CASES session_plan session_crossdev_and_matrix)
dt_add_test(scripts LABELS e2e tooling CASES bench_torch_cpu cmake_cudnn_root)
dt_add_test(scripts LABELS e2e CASES cross_device_cpu fmnist_cut torch_gpt_rebuilds_export)
# label committed: the committed CPU references against this build's bits (not under the
# sanitizers: the same runs' code paths are checked there by the models' own cases)
dt_add_test(scripts LABELS e2e committed CASES crossdev_references_current)
dt_add_test(scripts LABELS slow CASES deps_fetch_build)
set_tests_properties(scripts.deps_fetch_build PROPERTIES TIMEOUT 1200)
