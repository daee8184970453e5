dt_add_test(readme LABELS unit CASES config_reference_matches)
