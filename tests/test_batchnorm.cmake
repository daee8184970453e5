dt_add_test(batchnorm LABELS unit narrow CASES forward_matches_reference_and_order
            backward_gradcheck cuda_order_emulated running_and_inference)
