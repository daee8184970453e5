dt_add_test(reproduce LABELS e2e narrow CASES committed_references changed_digest_found refusals
            fast_cell_explained)
