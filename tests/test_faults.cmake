dt_add_test(faults LABELS unit CASES first_nonfinite_cpu first_nonfinite_fallback first_nonfinite_many missing_op_refused_by_name
            overflow_names_tensor)
dt_add_test(faults LABELS e2e CASES nan_weight_stops_replica nan_gradient_stops_replica
            check_finite_off write_fails_midrun first_write_fails unwritable_out
            file_size_limit_no_trap disk_full_at_second_write)
