dt_add_test(safety LABELS unit CASES escape_bytes regular_files_only
            dynlib_probe_names_missing)
dt_add_test(safety LABELS e2e CASES special_config_refused special_checkpoint_refused
            sigint_in_overhead sighup_in_overhead empty_overhead_csv escape_in_trace_header
            compare_names_missing_tensors)
