dt_add_test(data LABELS unit CASES
  idx3_plain idx3_gzip idx1_plain idx1_gzip truncated_payload truncated_header empty_file
  bad_magic bad_type wrong_ndim zero_dim oversized trailing_bytes corrupt_gzip missing_file
  free_safe dataset_load dataset_limits dataset_count_mismatch dataset_bad_label
  dataset_bad_shape dataset_missing_file dataset_env dataset_real pixel_value_quotient
  gather_emulation resident_batches_cpu)
