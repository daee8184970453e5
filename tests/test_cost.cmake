dt_add_test(cost LABELS unit CASES counts_follow_the_code record_is_the_code prediction_arithmetic
            counting_changes_nothing)
dt_add_test(cost LABELS e2e CASES cli_models cli_refuses)
# gpu: on a device, `detrain cost` counts each step's launches and waits beside the model's
# prediction (dt_backend_launch_counts); every model and level must agree. Skipped without one.
dt_add_test(cost LABELS gpu CASES gpu_counts_agree_with_model)
