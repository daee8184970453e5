# label committed: a check of this build's bits against committed files (make check-asan
# leaves it out: its code paths run there in other cases)
dt_add_test(cuda_e2e LABELS e2e committed CASES cpu_references_current)
dt_add_test(cuda_e2e LABELS gpu CASES mlp_portable_equals_cpu bnn_portable_equals_cpu
            run_to_run_reruns_identical manifest_names_gpu lenet_portable_equals_cpu
            lenet_run_to_run_replicas_identical)
