dt_add_test(net LABELS unit CASES mlp_as_layers lenet_as_layers shape_errors
            new_layers_thread_free residual_gradcheck residual_errors config_layers
            dropout_thread_free batchnorm_shards)
dt_add_test(net LABELS e2e CASES configs_same_digests)
dt_add_test(net LABELS gpu CASES cuda_equals_cpu)
