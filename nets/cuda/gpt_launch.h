/* Private to the CUDA backend: the launchers of nets/cuda/gpt.cu (the transformer's kernels),
 * included by both sides so a declaration and its extern "C" definition cannot drift apart.
 * Each returns 0 or the launch's cudaError_t; pointers are device memory. */
#ifndef DT_CUDA_GPT_LAUNCH_H
#define DT_CUDA_GPT_LAUNCH_H

#include "nets/cuda/dense_loss.h" /* struct dt_cuda_fixed_record */

#ifdef __cplusplus
extern "C" {
#endif

/* tokens, targets (rows) and h (rows, D) of x (B, T + 1): dt_gpt_token, dt_embed_elem. */
int dt_cuda_embedding_forward_launch(float *h, int32_t *tokens, int32_t *targets, const float *x,
                                     const float *wte, const float *wpe, int64_t B, int64_t T,
                                     int64_t D, const struct dt_cuda_launch *L);
/* atomics float: dwte[tok] += dh[r] by float atomicAdd (arrival order); the caller zeroes
 * dwte first unless accumulating. */
int dt_cuda_embedding_scatter_atomic(float *dwte, const float *dh, const int32_t *tokens,
                                     int64_t rows, int64_t V, int64_t D,
                                     const struct dt_cuda_launch *L);
/* The forced-order hook: per column, the rows in the order perm (device) onto dwte. */
int dt_cuda_embedding_scatter_in_order(float *dwte, const float *dh, const int32_t *tokens,
                                       const int64_t *perm, int64_t rows, int64_t V, int64_t D,
                                       const struct dt_cuda_launch *L);
/* atomics fixed_point: max |dh| -> shift (dt_fixed_shift_for(max, rows), on the device) ->
 * exact int64 sums per entry by integer atomics (acc: V * D counters) -> one rounding, then
 * = or += into dwte. rec gets the first non-finite input and the first overflowing entry. */
int dt_cuda_embedding_scatter_fixed(float *dwte, unsigned long long *acc,
                                    struct dt_cuda_fixed_record *rec, const float *dh,
                                    const int32_t *tokens, int64_t rows, int64_t V, int64_t D,
                                    bool accumulate, const struct dt_cuda_launch *L);
/* A warp per row: the lane functions of dt_layernorm_row / dt_layernorm_row_grad, the
 * lane partials combined by the shuffle butterfly (dt_lanes_combine's value). */
int dt_cuda_layernorm_forward_launch(float *y, float *mean, float *rstd, const float *x,
                                     const float *gamma, const float *beta, int64_t rows, int64_t D,
                                     const struct dt_cuda_launch *L);
int dt_cuda_layernorm_backward_launch(float *dx, float *gx, const float *dy, const float *x,
                                      const float *mean, const float *rstd, const float *gamma,
                                      int64_t rows, int64_t D, bool accumulate,
                                      const struct dt_cuda_launch *L);
/* Forward: unless `exact`, a block per query tile of DT_GPT_ATTN_TILE rows with the key
 * tiles in shared memory (2 DT_GPT_ATTN_TILE hd floats, at most DT_CUDA_ATTN_SMEM_MAX
 * bytes; wider heads take the per-row kernel), each thread one row's dt_attn_tile calls;
 * else one thread per (b, h, t) row: dt_attn_row. Backward: dt_attn_row_dscores per row,
 * then (unless `exact`, within the same shared memory) dK and dV per key tile and dQ per
 * query tile, a thread per row adding dt_attn_grad_elem's terms in its order
 * (dt_attn_grad_term); else dt_attn_grad_elem per element of dqkv. */
#define DT_CUDA_ATTN_SMEM_MAX 49152
int dt_cuda_attention_forward_launch(float *out, float *att, const float *qkv, int64_t B, int64_t T,
                                     int64_t H, int64_t D, bool portable, bool exact,
                                     const struct dt_cuda_launch *L);
int dt_cuda_attention_backward_launch(float *dqkv, float *ds, const float *dout, const float *att,
                                      const float *qkv, int64_t B, int64_t T, int64_t H, int64_t D,
                                      bool exact, const struct dt_cuda_launch *L);
/* The library path's per-row steps: dt_attn_softmax_row over att's rows (B H T of T), and
 * dt_attn_dscores_finish of ds's rows against att's. */
int dt_cuda_attention_softmax_launch(float *att, int64_t rows, int64_t T, bool portable,
                                     const struct dt_cuda_launch *L);
int dt_cuda_attention_dscores_finish_launch(float *ds, const float *att, int64_t rows, int64_t T,
                                            float scale, const struct dt_cuda_launch *L);
/* Elementwise: dt_gelu, dt_gelu_grad, y += x. */
int dt_cuda_gelu_launch(float *y, const float *dy, const float *x, int64_t n, bool backward,
                        bool own_tanh, const struct dt_cuda_launch *L);
int dt_cuda_add_launch(float *y, const float *x, int64_t n, const struct dt_cuda_launch *L);
/* One thread per row: the dropout op's modes (determinism/dropout.h); the lanes' seeds. */
int dt_cuda_dropout_launch(float *y, const float *x, uint8_t *keep, struct dt_xoro *lanes,
                           int64_t rows, int64_t width, const struct dt_dropout_site *site,
                           const struct dt_cuda_launch *L);
int dt_cuda_dropout_seed_launch(struct dt_xoro *lanes, int64_t rows, int64_t row0, uint64_t seed,
                                uint32_t step, uint32_t member, const struct dt_cuda_launch *L);

#ifdef __cplusplus
}
#endif

#endif
