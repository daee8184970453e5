dt_add_test(snapshot LABELS unit CASES round_trip write_rejects_bad_input digest_matches_hash
            read_errors distance_known_values list_ascending write_leaves_no_temp
            compare_identical_replicas compare_diverged_replicas compare_corrupted_snapshot
            compare_experiment_folders compare_cli_exit_codes)
