dt_add_test(ops LABELS unit narrow CASES dense_forward_matches_double dense_backward_gradcheck batch_sums_every_level
            relu_gradcheck softmax_xent_gradcheck sgd_matches_formula mlp_backward_gradcheck
            dense_thread_count_independent pool_spin_setting bias_fixed_point_split_matches_serial
            wgrad_forms_same_bits matmul_paths_match_scalar dense_paths_same_bits
            dense_fast_matches_double tree_as_stack wgrad_fixed_matches_definition
            bias_fast_column_sums_match_double)
