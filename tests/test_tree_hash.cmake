dt_add_test(tree_hash LABELS unit narrow CASES sha256_known_answers sha256_matches_openssl
            op_equals_kernel_emulation)
dt_add_test(tree_hash LABELS e2e CASES tree_traces)
dt_add_test(tree_hash LABELS gpu CASES gpu_equals_cpu)
