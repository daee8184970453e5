# tests/test_rng.c: the epsilon generators (Philox, reversible xoroshiro128** lanes,
# Box-Muller kernels, tensor layouts). `stats` cases draw 10^7 normals each: normal build
# only (make check runs them; the ASan pass runs -L unit). `slow` (make check-slow only):
# dieharder on the raw words, tests/rng_dieharder.sh.
dt_add_test(rng LABELS unit CASES xoro_round_trip xoro_jump_matches_steps
            xoro_zero_state_unreachable philox_random123_kat philox_matches_curand_host
            gauss_log_sincos_accuracy lfsr_backward_regenerates eps_philox_tiling_independent
            eps_bits_pinned)
dt_add_test(rng LABELS stats CASES gauss_statistics_philox gauss_statistics_lfsr
            gauss_streams_uncorrelated)
# philox_matches_curand_host dlopens libcurand (no CUDA needed to build); this hint is tried
# first, then the usual names and /usr/local/cuda paths. Without it the case is skipped.
find_library(DT_CURAND_LIBRARY NAMES curand
             HINTS /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib
                   /usr/local/cuda/lib)
if(DT_CURAND_LIBRARY)
  target_compile_definitions(test_rng PRIVATE DT_CURAND_LIBRARY="${DT_CURAND_LIBRARY}")
endif()
target_link_libraries(test_rng PRIVATE ${CMAKE_DL_LIBS})
foreach(g philox lfsr)
  add_test(NAME rng.dieharder_${g}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/rng_dieharder.sh $<TARGET_FILE:test_rng> ${g})
  set_tests_properties(rng.dieharder_${g} PROPERTIES LABELS slow SKIP_RETURN_CODE 77 TIMEOUT 3600)
endforeach()
