dt_add_test(xp LABELS unit narrow CASES slices_round_trip slices_combine_to_the_integer_product
            halves_round_once dot_vec_exact any_order_same_bits one_rounding error_within_bound_and_below_float32
            op_equals_reference_every_form dense_ops_under_exact_math_obey_no_order
            conv_weight_gradient_past_2_127)
dt_add_test(xp LABELS unit CASES real_tensors_mlp)
dt_add_test(xp LABELS gpu CASES gpu_equals_cpu)
