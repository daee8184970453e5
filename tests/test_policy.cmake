dt_add_test(policy LABELS unit CASES
  levels control_table set_control_valid set_control_invalid tf32_not_portable auto_name equal_controls describe
  print_table)
