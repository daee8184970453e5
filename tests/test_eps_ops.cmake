dt_add_test(eps_ops LABELS unit narrow CASES philox_op_matches_reference lfsr_seed_op_matches_reference
            lfsr_op_matches_reference lfsr_skip_lane_hook bnn_elementwise_formulas)
