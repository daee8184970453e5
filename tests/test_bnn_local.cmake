dt_add_test(bnn_local LABELS unit narrow CASES ops_match_definition
            gradients_match_double_reference training_bits fault_injection memory_accounting)
dt_add_test(bnn_local LABELS e2e committed CASES reference_reproduces)
