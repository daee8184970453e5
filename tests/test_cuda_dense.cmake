dt_add_test(cuda_dense LABELS unit CASES dense_elem_matches_cpu gemm_wide_schedule wgrad_elem_matches_cpu
            tree_blocked_matches_tree bias_elem_matches_cpu softmax_elem_matches_cpu
            bias_shards_emulation reduce_stream_equals_tree wgrad_shards_emulation
            bias_atomic_arrival_orders)
dt_add_test(cuda_dense LABELS gpu CASES dense_parity loss_parity grid_independence
            rerun_identical forced_orders numeric_errors deferred_checks
            bias_shards_one_launch wgrad_shards_one_launch)
