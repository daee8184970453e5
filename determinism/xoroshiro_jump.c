/* Jumps for the reversible generator (determinism/xoroshiro.h): move a xoroshiro128** state
 * k steps forwards or backwards without taking them one at a time.
 *
 * The state transition is F2-linear: with the state as a 128-bit vector v (bit j of s0 is
 * v_j, bit j of s1 is v_{64+j}), one step is v' = A v for a fixed invertible 128 x 128
 * matrix A over GF(2), and a step back is v = A^-1 v'. So k steps are A^k v. We keep the
 * matrices A^(2^i) and A^-(2^i) for i < 64 (built once by repeated squaring, 256 KiB) and
 * apply the ones whose bit is set in k: at most 64 matrix-vector products of 128 column
 * XORs each, independent of k's size. The products commute (powers of one matrix), so the
 * order of application does not matter.
 *
 * A matrix is stored by columns: col[j] = A e_j, the image of the state with only bit j set,
 * obtained by running dt_xoro_next (dt_xoro_prev for the inverse) on that state, so the
 * tables are derived from the step functions themselves and cannot disagree with them.
 * Squaring: (A^2) e_j = A (A e_j), one matrix-vector product per column.
 *
 * Building both tables takes 2 x 63 squarings of 128 products (~2 M word operations, well
 * under a millisecond), done once per process under pthread_once, so concurrent callers are
 * safe; after that a jump reads the tables only. */
#include <pthread.h>
#include <stdint.h>

#include "determinism/xoroshiro.h"

struct dt_xoro_mat {
    struct dt_xoro col[128];
};

static struct dt_xoro_mat dt_xoro_pow_fwd[64]; /* A^(2^i) */
static struct dt_xoro_mat dt_xoro_pow_bwd[64]; /* A^-(2^i) */
static pthread_once_t dt_xoro_tables_once = PTHREAD_ONCE_INIT;

/* m v: the XOR of the columns selected by v's bits (branch-free masks). */
static struct dt_xoro dt_xoro_mat_apply(const struct dt_xoro_mat *m, struct dt_xoro v)
{
    uint64_t r0 = 0, r1 = 0;
    for (int j = 0; j < 64; j++) {
        uint64_t mask = (uint64_t)0 - ((v.s0 >> j) & 1u);
        r0 ^= m->col[j].s0 & mask;
        r1 ^= m->col[j].s1 & mask;
    }
    for (int j = 0; j < 64; j++) {
        uint64_t mask = (uint64_t)0 - ((v.s1 >> j) & 1u);
        r0 ^= m->col[64 + j].s0 & mask;
        r1 ^= m->col[64 + j].s1 & mask;
    }
    struct dt_xoro r = {.s0 = r0, .s1 = r1};
    return r;
}

static void dt_xoro_build_powers(struct dt_xoro_mat pow[64], int backwards)
{
    for (int j = 0; j < 128; j++) {
        struct dt_xoro e = {.s0 = j < 64 ? (uint64_t)1 << j : 0,
                            .s1 = j < 64 ? 0 : (uint64_t)1 << (j - 64)};
        if (backwards) dt_xoro_prev(&e);
        else dt_xoro_next(&e);
        pow[0].col[j] = e;
    }
    for (int i = 1; i < 64; i++)
        for (int j = 0; j < 128; j++)
            pow[i].col[j] = dt_xoro_mat_apply(&pow[i - 1], pow[i - 1].col[j]);
}

static void dt_xoro_build_tables(void)
{
    dt_xoro_build_powers(dt_xoro_pow_fwd, 0);
    dt_xoro_build_powers(dt_xoro_pow_bwd, 1);
}

static void dt_xoro_jump_with(struct dt_xoro *s, uint64_t k, const struct dt_xoro_mat pow[64])
{
    struct dt_xoro v = *s;
    for (int i = 0; k != 0; i++, k >>= 1)
        if (k & 1u) v = dt_xoro_mat_apply(&pow[i], v);
    *s = v;
}

void dt_xoro_jump(struct dt_xoro *s, uint64_t k)
{
    pthread_once(&dt_xoro_tables_once, dt_xoro_build_tables);
    dt_xoro_jump_with(s, k, dt_xoro_pow_fwd);
}

void dt_xoro_jump_back(struct dt_xoro *s, uint64_t k)
{
    pthread_once(&dt_xoro_tables_once, dt_xoro_build_tables);
    dt_xoro_jump_with(s, k, dt_xoro_pow_bwd);
}
