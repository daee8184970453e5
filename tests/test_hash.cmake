dt_add_test(hash LABELS unit CASES sha256_vectors canonical_float_bytes model_digest_definition
            model_digest_stable model_digest_bit_flip model_digest_names_and_order)
