# The fuzz targets' checks without libFuzzer, in every build (the ASan/UBSan one included):
# fuzz_<target>_replay (fuzz/fuzz_<target>.c + fuzz/replay_main.c, the normal compiler)
# runs every input that once crashed (fuzz/regressions/<target>/) and every seed
# (fuzz/corpus/<target>/) through LLVMFuzzerTestOneInput. Tests fuzz.<target>_replay (unit).
foreach(t config idx trace checkpoint)
  add_executable(fuzz_${t}_replay ${CMAKE_SOURCE_DIR}/fuzz/fuzz_${t}.c
                 ${CMAKE_SOURCE_DIR}/fuzz/replay_main.c)
  target_link_libraries(fuzz_${t}_replay PRIVATE detrain_core)
  add_test(NAME fuzz.${t}_replay COMMAND fuzz_${t}_replay
           ${CMAKE_SOURCE_DIR}/fuzz/regressions/${t} ${CMAKE_SOURCE_DIR}/fuzz/corpus/${t})
  set_tests_properties(fuzz.${t}_replay PROPERTIES LABELS unit)
endforeach()
