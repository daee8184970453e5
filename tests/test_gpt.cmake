dt_add_test(gpt LABELS unit narrow CASES ops_are_the_shared_functions ops_match_double_reference
            gradients_match_double_reference embedding_scatter_controls adamw_and_schedule
            clip_norm_controls dropout_masks dropout_philox_blocks_any_order dropout_lane_tiles_match_rows attention_library_path attention_tiles
            layernorm_warp
            text_dataset refusals)
dt_add_test(gpt LABELS e2e narrow CASES levels_and_threads resume_after_kill explain_names_scatter
            export_and_batches vs_torch nonfinite_stops dropout_runs)
dt_add_test(gpt LABELS e2e CASES ranks_independent dropout_ranks LOCKS mpirun)
dt_add_test(gpt LABELS gpu gpt CASES gpu_gradients_equal_cpu_and_grid_free gpu_gradients_exact_math_equal_cpu
            gpu_gradients_run_to_run_grid_free gpu_host_waits_per_step
            gpu_portable_trace_equals_cpu gpu_run_to_run_replicas_identical
            gpu_explain_names_scatter)
