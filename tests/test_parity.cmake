dt_add_test(parity LABELS unit narrow CASES table_has_every_op op_rows_carry_explain_metadata cpu_table comparison_can_fail)
dt_add_test(parity LABELS gpu CASES gpu_table)
