dt_add_test(cuda_bnn LABELS unit CASES sigma_elem_matches_cpu
            sample_accumulate_finish_elem_match_cpu elem_order_is_observable
            philox_block_matches_cpu lane_walk_matches_cpu)
dt_add_test(cuda_bnn LABELS gpu CASES gpu_eps_philox_parity gpu_eps_lfsr_parity
            gpu_bnn_elementwise_parity)
