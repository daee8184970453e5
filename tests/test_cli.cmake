dt_add_test(cli LABELS unit CASES help_and_version usage_errors_exit_2
            config_errors_stop_before_training run_dry_run dry_run_refuses_what_run_refuses dataset_errors unwritable_output cuda_unavailable
            short_run_outputs progress_line_on_terminal)
dt_add_test(cli LABELS e2e CASES sigint_keeps_valid_prefix bench_flags_slow_baseline)
