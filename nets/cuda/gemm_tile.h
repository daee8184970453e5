/* The ordered matrix product's large-tile schedule (nets/cuda/dense.cu,
 * gemm_ordered_wide_kernel), written once for the kernel and for its host emulation
 * (tests/test_cuda_dense.c, gemm_wide_schedule): a block of DT_GEMM_THREADS threads owns a
 * DT_GEMM_BM x DT_GEMM_BN tile of C, thread tid a DT_GEMM_TM x DT_GEMM_TN set of its outputs
 * (rows ty + 16 r, columns tx + 16 c: ty = tid / 16, tx = tid % 16), each in a register. The
 * operands pass through shared memory DT_GEMM_BK values of k at a time, in k order; every
 * output adds its products over k ascending from +0 with dt_dense_mac -- the sequence of
 * roundings of the 16 x 16 kernel and of the CPU (nets/cpu/dense.c), so either kernel gives
 * the same bits. What the tile changes is the traffic: each staged value feeds 4 outputs of
 * a thread from a register, where the 16 x 16 kernel read two shared words a product.
 * Pure C with DT_HD: the kernel calls these between its barriers. */
#ifndef DT_CUDA_GEMM_TILE_H
#define DT_CUDA_GEMM_TILE_H

#include <stdint.h>

#include "core/hd.h"
#include "nets/cuda/dense_loss.h"
#include "nets/dense_loss_elem.h"

#define DT_GEMM_BM 64
#define DT_GEMM_BN 64
#define DT_GEMM_BK 16
#define DT_GEMM_THREADS 256
#define DT_GEMM_TM 4 /* DT_GEMM_BM / 16 */
#define DT_GEMM_TN 4 /* DT_GEMM_BN / 16 */
/* the staged rows' strides, one word past the tile: a warp's stores of either operand
 * layout, and its reads, in distinct banks */
#define DT_GEMM_AS_LD (DT_GEMM_BM + 1)
#define DT_GEMM_BS_LD (DT_GEMM_BN + 1)
#define DT_GEMM_STAGED_FLOATS (DT_GEMM_BK * (DT_GEMM_AS_LD + DT_GEMM_BS_LD))

/* Tile t of the product (grid-stride order): batch z, first row and column, and its k. */
struct dt_gemm_tile {
    int64_t z, i0, j0, kz;
};
static inline DT_HD int64_t dt_gemm_wide_tiles(const struct dt_cuda_gemm_args *g)
{
    return (g->M + DT_GEMM_BM - 1) / DT_GEMM_BM * ((g->N + DT_GEMM_BN - 1) / DT_GEMM_BN) *
           g->batches;
}
static inline DT_HD struct dt_gemm_tile dt_gemm_tile_of(const struct dt_cuda_gemm_args *g,
                                                        int64_t t)
{
    const int64_t tiles_n = (g->N + DT_GEMM_BN - 1) / DT_GEMM_BN;
    const int64_t per_batch = (g->M + DT_GEMM_BM - 1) / DT_GEMM_BM * tiles_n;
    struct dt_gemm_tile T;
    T.z = t / per_batch;
    const int64_t r = t % per_batch;
    T.i0 = r / tiles_n * DT_GEMM_BM;
    T.j0 = r % tiles_n * DT_GEMM_BN;
    T.kz = g->K - T.z * g->k_chunk < g->k_chunk ? g->K - T.z * g->k_chunk : g->k_chunk;
    return T;
}

/* Thread tid's share of staging k0 .. k0 + DT_GEMM_BK - 1: as[k][i] = A(i0 + i, k0 + k),
 * bs[k][j] = B(k0 + k, j0 + j) (rows DT_GEMM_AS_LD, DT_GEMM_BS_LD apart), +0 outside the
 * operands. Consecutive threads walk each
 * operand's unit-stride axis (coalesced reads). */
static inline DT_HD void dt_gemm_stage(float *as, float *bs, const struct dt_cuda_gemm_args *g,
                                       const struct dt_gemm_tile *T, int64_t k0, int tid)
{
    const float *a = g->a + T->z * g->a_batch, *b = g->b + T->z * g->b_batch;
    for (int e = tid; e < DT_GEMM_BM * DT_GEMM_BK; e += DT_GEMM_THREADS) {
        const int i = g->a_sk == 1 ? e / DT_GEMM_BK : e % DT_GEMM_BM;
        const int k = g->a_sk == 1 ? e % DT_GEMM_BK : e / DT_GEMM_BM;
        as[k * DT_GEMM_AS_LD + i] = (T->i0 + i < g->M && k0 + k < T->kz)
                                        ? a[(T->i0 + i) * g->a_si + (k0 + k) * g->a_sk]
                                        : 0.0f;
    }
    for (int e = tid; e < DT_GEMM_BN * DT_GEMM_BK; e += DT_GEMM_THREADS) {
        const int j = g->b_sj == 1 ? e % DT_GEMM_BN : e / DT_GEMM_BK;
        const int k = g->b_sj == 1 ? e / DT_GEMM_BN : e % DT_GEMM_BK;
        bs[k * DT_GEMM_BS_LD + j] = (k0 + k < T->kz && T->j0 + j < g->N)
                                        ? b[(k0 + k) * g->b_sk + (T->j0 + j) * g->b_sj]
                                        : 0.0f;
    }
}

/* Thread tid's outputs over the kn staged values of k, in k order. */
static inline DT_HD void dt_gemm_mac_staged(float acc[DT_GEMM_TM][DT_GEMM_TN], const float *as,
                                            const float *bs, int kn, int tid)
{
    const int ty = tid / 16, tx = tid % 16;
    for (int kk = 0; kk < kn; kk++) {
        float av[DT_GEMM_TM], bv[DT_GEMM_TN];
        for (int r = 0; r < DT_GEMM_TM; r++) av[r] = as[kk * DT_GEMM_AS_LD + ty + 16 * r];
        for (int c = 0; c < DT_GEMM_TN; c++) bv[c] = bs[kk * DT_GEMM_BS_LD + tx + 16 * c];
        for (int r = 0; r < DT_GEMM_TM; r++)
            for (int c = 0; c < DT_GEMM_TN; c++) acc[r][c] = dt_dense_mac(acc[r][c], av[r], bv[c]);
    }
}

/* Thread tid's outputs into C (those inside it). */
static inline DT_HD void dt_gemm_store_tile(const struct dt_cuda_gemm_args *g,
                                            const struct dt_gemm_tile *T,
                                            const float acc[DT_GEMM_TM][DT_GEMM_TN], int tid)
{
    const int ty = tid / 16, tx = tid % 16;
    for (int r = 0; r < DT_GEMM_TM; r++)
        for (int c = 0; c < DT_GEMM_TN; c++) {
            const int64_t i = T->i0 + ty + 16 * r, j = T->j0 + tx + 16 * c;
            if (i < g->M && j < g->N) g->c[T->z * g->c_batch + i * g->N + j] = acc[r][c];
        }
}

#endif
