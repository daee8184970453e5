dt_add_test(bnn LABELS unit narrow CASES regenerated_eps_equals_forward
            training_matches_stored_digests
            fault_injection_names_layer gradients_match_double_reference
            thread_count_independent memory_accounting ensemble_evaluate ece_known_values)
dt_add_test(bnn LABELS e2e CASES learns policies_traces)
