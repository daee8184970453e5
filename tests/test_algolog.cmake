dt_add_test(algolog LABELS unit CASES unchanged_notes_one_row_per_call change_mid_run_starts_a_row
            short_last_step_gets_its_rows more_calls_than_followed rows_beyond_the_limit_are_counted
            csv_header_and_rows json_text cpu_run_writes_no_algos)
