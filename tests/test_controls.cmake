dt_add_test(controls LABELS unit narrow CASES portable_thread_count_independent
            run_to_run_reruns_identical pinned_forced_orders reduction_forced_orders atomics_forced_orders
            fixed_differs_from_unordered lenet_portable_thread_count_independent
            lenet_run_to_run_reruns_identical lenet_reduction_forced_orders lenet_atomics_forced_orders)
