# tests/test_crossdev.c: detrain compare --table on tiny real runs (2 and 1 threads) and on
# copies with an altered row, a missing replica, a shorter trace or a broken one.
dt_add_test(crossdev LABELS unit narrow CASES table_identical table_divergent_step_and_tensor
            table_missing_replica table_different_lengths table_bad_input)
