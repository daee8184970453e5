dt_add_test(conv LABELS unit narrow CASES conv2d_forward_matches_double conv2d_forward_ordered_bits
            conv2d_backward_weight_fixed_bits conv2d_backward_data_fixed_bits
            conv2d_backward_gradcheck
            maxpool_forward_matches_reference maxpool_backward_gradcheck maxpool_ties
            conv_pool_thread_count_independent conv_forced_orders maxpool_forced_orders
            lenet_backward_gradcheck shape_errors conv_onednn_path global_avgpool_gradcheck
            avgpool_gradcheck)
