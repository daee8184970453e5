# One short end-to-end training run under valgrind's memcheck, which must be clean
# (--error-exitcode=1; definite and possible leaks count too): an MLP on 256 training and
# 100 test images, 6 steps, policies fast (OpenBLAS, float atomics) and portable (own
# kernels), 2 replicas, per-tensor hashes, snapshots, the report. Test valgrind.tiny_run,
# label `valgrind` (make check runs it in the plain build: about 5 s, 15 s where the CUDA
# libraries load).
# tests/valgrind.supp holds the suppressions, each with its reason. Not added to a
# sanitizer build (valgrind cannot run ASan binaries); skipped (77) without valgrind.
if(NOT DETRAIN_SANITIZE AND NOT DETRAIN_FUZZ)
  find_program(DT_VALGRIND valgrind)
  set(dt_vg_out ${CMAKE_CURRENT_BINARY_DIR}/tmp/valgrind.tiny_run)
  if(DT_VALGRIND)
    add_test(NAME valgrind.tiny_run
             COMMAND sh -c "rm -rf \"$1\" && shift && exec \"$@\"" sh ${dt_vg_out}
             ${DT_VALGRIND} -q --error-exitcode=1 --leak-check=full
             --errors-for-leak-kinds=definite,possible --num-callers=30
             --suppressions=${CMAKE_CURRENT_SOURCE_DIR}/valgrind.supp
             $<TARGET_FILE:detrain> run ${CMAKE_CURRENT_SOURCE_DIR}/data/tiny.yaml
             --out ${dt_vg_out} --quiet --set dataset.train_limit=256
             --set dataset.test_limit=100 --set train.steps=6
             "--set=policies=[fast, portable]" --set report.overhead_samples=0
             --set report.snapshots=2)
  else()
    add_test(NAME valgrind.tiny_run COMMAND sh -c
             "echo 'valgrind not found (bash scripts/setup.sh --check installs it)'; exit 77")
  endif()
  set_tests_properties(valgrind.tiny_run PROPERTIES LABELS valgrind SKIP_RETURN_CODE 77)
endif()
