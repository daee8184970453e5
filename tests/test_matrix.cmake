dt_add_test(matrix LABELS unit CASES parse_entries precedence structure_errors entry_errors
            report_aggregation)
dt_add_test(matrix LABELS e2e CASES run_two_entries only_entries cuda_entry_skipped
            failed_entry_others_run config_error_before_any_run)
