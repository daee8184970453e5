dt_add_test(report LABELS unit CASES summary_values cells_values overhead_inconclusive algorithms_section
            two_settings reproducible_copy plots_gnuplot plots_none print_summary_table
            error_missing_config error_malformed_predictions error_snapshot_mismatch
            cut_last_lines_ignored error_trimmed_completed_replica)
