dt_add_test(reproduce LABELS e2e narrow CASES committed_references changed_digest_found refusals
            fast_cell_explained edited_values_found trace_against_config changed_by_user_or_data
            result_being_written missing_device cut_trace_cosine)
