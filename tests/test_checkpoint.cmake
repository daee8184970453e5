dt_add_test(checkpoint LABELS unit CASES format_round_trip format_errors check_refusals
            config_lines)
dt_add_test(checkpoint LABELS e2e CASES mlp_kill_resume lenet_kill_resume bnn_kill_resume
            sigint_resume extend_steps last_step_checkpoint fast_resumes truncated_checkpoint
            other_config_checkpoint other_policy_checkpoint resume_refusals
            resume_checks_data resume_cosine_extend_refused resume_older_build_config
            resume_keeps_snapshots)
