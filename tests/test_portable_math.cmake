dt_add_test(portable_math LABELS unit
            CASES exp_ulp_sweep log_ulp_sweep log1p_softplus_ulp specials bits_pinned
            tanh_ulp tanh_branch_free_same_bits
            exp_softplus_branch_free_same_bits)
# bits_pinned compares the -O2 build of determinism/portable_math.h with this -O0 build.
target_sources(test_portable_math PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/portable_math_o0.c)
set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/portable_math_o0.c
                            PROPERTIES COMPILE_OPTIONS "-O0")
