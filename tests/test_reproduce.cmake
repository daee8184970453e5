dt_add_test(reproduce LABELS e2e narrow CASES changed_digest_found refusals fast_cell_explained
            edited_values_found trace_against_config changed_by_user_or_data result_being_written
            missing_device cut_trace_cosine)
# label committed: the committed references reproduced (widest and narrow path); the
# sanitizer build leaves it out -- reproduce's code paths run there in the cases above
dt_add_test(reproduce LABELS e2e narrow committed CASES committed_references)
