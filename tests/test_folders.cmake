dt_add_test(folders LABELS e2e CASES refused_ranks_keep_result LOCKS mpirun)
dt_add_test(folders LABELS e2e CASES refused_value_keeps_result
            other_config_refused rerun_is_explicit foreign_folder_refused overwrite_removes_only_results
            output_locations_checked outputs_never_onto_inputs memory_estimate_matches_peak
            lock_held_refuses
            concurrent_runs planted_symlink links_never_followed
            resume_completes_cut_trace_row terminal_paths_escaped resume_inputs_checked_first unwritable_replica_folder
            oversized_model_refused
            allocation_fails_midrun
            export_refuses_special_files export_verifies_weights export_messages
            memory_limit_counts_address_space_and_corpus)
