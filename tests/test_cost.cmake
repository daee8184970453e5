dt_add_test(cost LABELS unit CASES counts_follow_the_code prediction_arithmetic
            counting_changes_nothing)
dt_add_test(cost LABELS e2e CASES cli_models cli_refuses)
