dt_add_test(metrics LABELS unit CASES churn_known_vectors l2_known_weights log_spaced_steps_known
            bootstrap_interval_known bench_flags_fixed_samples bench_level_flag
            bench_relax_flag)
