dt_add_test(cuda_conv LABELS unit CASES patch_elem_matches_cpu col2im_fixed_matches_cpu
            col2im_ranked_matches_cpu_forced maxpool_out_matches_cpu maxpool_backward_matches_cpu)
dt_add_test(cuda_conv LABELS gpu CASES conv_parity pool_parity pool_ties_bitwise
            grid_independence forced_orders numeric_errors deterministic_notes autotune_notes
            exec_refused_falls_back wgrad_shards_one_launch)
