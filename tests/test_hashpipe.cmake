dt_add_test(hashpipe LABELS unit CASES copy_out_cpu_in_order copy_out_fallback
            profile_synchronizes pipeline_matches_sync pipeline_tree_digests
            pipeline_write_error)
dt_add_test(hashpipe LABELS e2e CASES async_trace_identical async_nonfinite_loss
            async_sigint_prefix)
dt_add_test(hashpipe LABELS gpu CASES cuda_copy_out_exact cuda_copy_out_snapshot
            cuda_pipeline_matches_cpu)
