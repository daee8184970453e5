dt_add_test(cuda LABELS unit CASES create_or_clear_error missing_op_named)
dt_add_test(cuda LABELS gpu CASES elementwise_parity first_nonfinite_parity
  resident_gather_parity)
