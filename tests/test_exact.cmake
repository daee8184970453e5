dt_add_test(exact LABELS unit narrow CASES ops_per_shard exact_sum_reference
            rank_grouping_negative_control mlp_one_pass_equals_passes
            lenet_one_pass_equals_passes exact_round_ties
            sum_packs_equals_one_rank exact_sum_double_shortcut max_bits_scan
            exact_sum_nonfinite_left exact_sum_unit_edge exact_sum_slices
            wgrad_summed_equals_exact_sum)
dt_add_test(exact LABELS gpu CASES cuda_exact_sum_equals_cpu)
