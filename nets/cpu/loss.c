/* Softmax cross-entropy on the CPU backend. Rows are independent; the batch mean of the
 * loss is a serial sum in batch-index order. exp/log come from libm for now: the same
 * bits on one machine; the portable math control (own exp/log) arrives with the CPU
 * determinism-controls work. */
#include <math.h>

#include "nets/cpu/cpu.h"

/* portable within one libm: per row, max-shifted softmax; loss = log(sum exp(z - max)) -
 * (z_label - max); the batch sum runs b = 0..B-1 in order, in double, rounded once. */
enum dt_status dt_cpu_softmax_xent_forward(struct dt_backend *be, float *probs, float *loss_host,
                                           int64_t *correct_host, const float *logits,
                                           const int32_t *labels, int64_t B, int64_t C,
                                           const struct dt_policy *pol)
{
    double total = 0.0;
    int64_t correct = 0;
    for (int64_t b = 0; b < B; b++) {
        const float *z = logits + b * C;
        float *p = probs + b * C;
        int32_t y = labels[b];
        DT_ASSERT_MSG(y >= 0 && y < C, "label out of range in softmax_xent_forward");
        float m = z[0];
        int64_t arg = 0;
        for (int64_t c = 1; c < C; c++)
            if (z[c] > m) {
                m = z[c];
                arg = c;
            }
        float s = 0.0f;
        for (int64_t c = 0; c < C; c++) {
            p[c] = expf(z[c] - m);
            s += p[c];
        }
        for (int64_t c = 0; c < C; c++) p[c] = p[c] / s;
        float loss_b = logf(s) - (z[y] - m);
        total += (double)loss_b;
        correct += (arg == y);
    }
    *loss_host = (float)(total / (double)B);
    if (correct_host) *correct_host = correct;
    return DT_OK;
}

/* portable: elementwise (p - onehot) / B. */
enum dt_status dt_cpu_softmax_xent_backward(struct dt_backend *be, float *dlogits,
                                            const float *probs, const int32_t *labels,
                                            int64_t B, int64_t C, const struct dt_policy *pol)
{
    const float inv_b = 1.0f / (float)B;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t c = 0; c < C; c++) {
            float t = (c == labels[b]) ? 1.0f : 0.0f;
            dlogits[b * C + c] = (probs[b * C + c] - t) * inv_b;
        }
    }
    return DT_OK;
}
