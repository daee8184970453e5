dt_add_test(dist LABELS unit CASES shard_rules scaled_loss_gradient fixed_to_float_agrees
            bnn_kl_counted_once shared_protocol_equals_one_process)
dt_add_test(dist LABELS e2e CASES portable_mlp_ranks portable_lenet_ranks
            rank_count_changes_unordered_and_fixed perturbed_rank_detected
            resume_across_rank_counts refusals overhead_in_lockstep
            portable_bnn_ranks portable_bnn_local_ranks bnn_rank_count_changes_fixed portable_batchnorm_ranks
            staged_exchange_equals_plain exchange_path_named LOCKS mpirun)
# mpi: needs mpirun and a build with DETRAIN_MPI; the GPU plan leaves it out where the
# device machine has no MPI (scripts/gpu_session.sh tests).
dt_add_test(dist LABELS gpu mpi CASES cuda_one_rank_equals_plain LOCKS mpirun)
