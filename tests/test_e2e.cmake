dt_add_test(e2e LABELS e2e CASES quickstart_accuracy vary_init_differs_from_step0
            vary_data_order_differs_from_step1 compare_finds_chosen_step lenet_learns
            lenet_policies_vary_threads noise_matrix_cells report_rebuilds_copied_folder
            exact_math_learns_thread_free)
# also on the narrow path (make check-narrow)
dt_add_test(e2e LABELS e2e narrow CASES replicas_identical rerun_and_threads_identical
            thread_counts_and_forced_orders)
