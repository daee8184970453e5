dt_add_test(graph LABELS unit CASES fake_same_trace fake_broken_capture_reruns
            fake_self_check_catches fake_fast_check_tolerance fake_refusals)
dt_add_test(graph LABELS gpu CASES cuda_graphs_same_bits)
