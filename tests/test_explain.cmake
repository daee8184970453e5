dt_add_test(explain LABELS e2e narrow CASES hooked_bias_gradient hooked_conv_scatter hooked_epsilon
            deterministic_step_no_difference quickstart_fast_replicas replay_mismatch_refused
            replay_retries_missed_steps passes_over_agreed_parameters
            checkpoint_at_divergence
            usage_errors report_section different_experiments_named step_out_of_range)
dt_add_test(explain LABELS gpu CASES cpu_vs_gpu)
