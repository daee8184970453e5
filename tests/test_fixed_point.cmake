dt_add_test(fixed_point LABELS unit CASES exact_vs_reference order_independent overflow_reported
            single_rounding shift_choice bounded_matches_exact)
