/* The portable math functions compiled at -O0 (tests/test_portable_math.cmake sets the
 * flag on this file only), so test_portable_math's bits_pinned case can compare them bit
 * for bit with the -O2 build of the same header. */
#include <stdint.h>

#include "determinism/portable_math.h"

/* out[i] = function `fn` (0 exp, 1 log, 2 log1p, 3 softplus) of in[i], built at -O0. */
void dt_pm_o0_eval(float *out, const float *in, int64_t n, int fn);

void dt_pm_o0_eval(float *out, const float *in, int64_t n, int fn)
{
    for (int64_t i = 0; i < n; i++) {
        switch (fn) {
        case 0: out[i] = dt_exp_portable(in[i]); break;
        case 1: out[i] = dt_log_portable(in[i]); break;
        case 2: out[i] = dt_log1p_portable(in[i]); break;
        default: out[i] = dt_softplus_portable(in[i]); break;
        }
    }
}
