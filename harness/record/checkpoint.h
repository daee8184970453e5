/* Checkpoints: everything one replica needs to carry on after an interruption so that its
 * trace goes on exactly as if it had never stopped (`detrain run CONFIG --resume DIR`).
 * Data path (docs/DESIGN.md): harness/train -> <replica>/checkpoint.bin -> harness/train.
 *
 * A replica's state is small: the weights w and the optimizer momentum v of every parameter
 * (AdamW: its first moment; the second moment s too)
 * (gradients are recomputed from scratch at every step) and the step count, which is also
 * the state of every generator -- Bayesian epsilon is drawn from (seed, step, member,
 * sample), rng: lfsr seeds its lanes per step, and the data order is a pure function of
 * (seed, data-order stream, step): the per-epoch permutation is a cache rebuilt from the
 * step. The hashing state is the last trace row written (its step and digest).
 *
 * File format, version 1, little-endian (str = u32 byte count, then the bytes, no NUL):
 *   8 bytes   magic "DTCKPT\r\n"
 *   u32       format version (1), u32 0
 *   u64       length of the whole file in bytes, checksum included
 *   i64 step; u64 seed; u32 ensemble member; u32 0; u64 init stream; u64 data-order
 *             stream; i64 data-order position (examples consumed: step x batch)
 *   str       policy name; str policy controls (dt_policy_describe)
 *   32 bytes  config digest; str the resolved config JSON (dt_config_write_json)
 *   i64       last traced step (-1: none); 32 bytes its model digest
 *   32 bytes  model digest of the weights below (the trace's definition, harness/record/hash.h)
 *   i32       n_params, i32 0; per parameter: str name, i32 ndim, i32 flags (bit 0: a
 *             second moment follows; 0 in files from before AdamW), i64 shape[4], i64 count
 *   per parameter: count float32 w, then count float32 v, then with flag bit 0 count
 *             float32 s
 *   32 bytes  SHA-256 of every byte before it (truncation and corruption are named)
 * Written atomically: checkpoint.bin.tmp, fflush, fsync, rename, fsync of the folder.
 *
 * The config digest is SHA-256 over the config's "dotted.key=value" lines
 * (dt_checkpoint_config_lines) EXCLUDING the keys that may change on resume without
 * changing the trace: train.steps (a finished run can be extended), train.checkpoint_every,
 * train.checkpoint_at_divergence (it only adds divergence.bin), train.check_finite (it only
 * decides whether a fault is named by the per-step scan or, later, by a non-finite loss),
 * hash.async (the trace is the same file either way) and report.* (measured after
 * training). Any other difference refuses the checkpoint, naming the keys.
 * divergence.bin (harness/run/divwatch.h) has this format too.
 */
#ifndef DT_CHECKPOINT_H
#define DT_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/util.h"
#include "determinism/policy.h"
#include "harness/setup/config.h"
#include "harness/record/hash.h"
#include "nets/model.h"

#define DT_CHECKPOINT_MAGIC "DTCKPT\r\n"
#define DT_CHECKPOINT_VERSION 1
#define DT_CHECKPOINT_FILE "checkpoint.bin"

/* Where a replica stands besides its model (m->step, m->seed, m->member). */
struct dt_checkpoint_info {
    uint64_t init_stream, order_stream; /* the replica's stream indices (determinism/streams.h) */
    int64_t order_position;             /* training examples consumed so far */
    int64_t traced_step;                /* the last trace row written; -1: none */
    const char *traced_digest;          /* its model digest (hex) */
};

struct dt_checkpoint_param {
    char name[DT_PARAM_NAME];
    int ndim;
    int64_t shape[4];
    int64_t n;
    bool has_s;       /* the file holds a second moment (flags bit 0) */
    float *w, *v, *s; /* n each; s (AdamW's second moment) NULL without one */
};

/* A checkpoint read back (dt_checkpoint_read). */
struct dt_checkpoint {
    int64_t step;
    uint64_t seed, init_stream, order_stream;
    uint32_t member;
    int64_t order_position;
    char policy[DT_POLICY_NAME_MAX];
    char controls[256];
    uint8_t config_digest[DT_DIGEST_BYTES];
    char *config_json;
    int64_t traced_step;
    char traced_digest[DT_DIGEST_HEX];
    char model_digest[DT_DIGEST_HEX];
    int n_params;
    struct dt_checkpoint_param *params;
};

/* <replica_dir>/checkpoint.bin */
void dt_checkpoint_path(char *buf, size_t size, const char *replica_dir);

/* The resolved config of exp as JSON (dt_config_write_json), malloc'ed. */
char *dt_checkpoint_config_text(const struct dt_experiment *exp);

/* The "dotted.key=value" lines (one per leaf, document order; a list is one value, as
 * written) of a config JSON object, without the keys a resume may change (see above).
 * DT_ERR_DATA naming `what` when the text is not such a JSON object. */
enum dt_status dt_checkpoint_config_lines(struct dt_strbuf *out, const char *json, const char *what,
                                          struct dt_error *err);

/* Compare two config JSON texts on those lines. *differ says whether they differ; `buf`
 * then lists the first four differing keys with both values, e.g.
 * "train.optimizer.lr (checkpoint: 0.05, this config: 0.1)" (name_a and name_b name the
 * sides), and how many more differ. */
enum dt_status dt_checkpoint_config_diff(char *buf, size_t size, bool *differ, const char *json_a,
                                         const char *name_a, const char *json_b, const char *name_b,
                                         struct dt_error *err);

/* Do two experiments differ beyond what two runs of one config may: their names, config
 * files, devices and report settings, and with `cells_may_differ` also their policies, vary
 * settings, replica counts and hashing (explain compares replicas of different cells)?
 * *differ and buf as dt_checkpoint_config_diff, sides named "A" and "B". */
enum dt_status dt_experiment_diff(char *buf, size_t size, bool *differ,
                                  const struct dt_experiment *a, const struct dt_experiment *b,
                                  bool cells_may_differ, struct dt_error *err);

/* Write the checkpoint of model m (trained under exp and pol) to `path` atomically. The
 * weights and momenta are downloaded from m's backend. */
enum dt_status dt_checkpoint_write(const char *path, const struct dt_experiment *exp,
                                   const struct dt_policy *pol, struct dt_model *m,
                                   const struct dt_checkpoint_info *info, struct dt_error *err);

/* Read and verify a checkpoint: DT_ERR_IO when it cannot be read, DT_ERR_DATA naming the
 * file and the fault (bad magic, unknown version, truncated: expected N bytes found M,
 * checksum mismatch, a malformed field). *ck is zeroed first and freed on error. */
enum dt_status dt_checkpoint_read(struct dt_checkpoint *ck, const char *path, struct dt_error *err);

/* May ck continue replica `m` of this experiment under `pol` with these streams?
 * DT_ERR_CONFIG naming `path` and what differs: the config keys (with both values), the
 * policy (name or controls), the seed, a stream, a step past train.steps; DT_ERR_DATA for
 * parameters that differ in name or shape, or a data-order position that is not step x
 * batch. */
enum dt_status dt_checkpoint_check(const struct dt_checkpoint *ck, const char *path,
                                   const struct dt_experiment *exp, const struct dt_policy *pol,
                                   const struct dt_model *m, const struct dt_checkpoint_info *want,
                                   uint32_t member, struct dt_error *err);

/* Load ck into m (checked first): weights and momenta uploaded, m->step, m->seed and
 * m->member set. */
void dt_checkpoint_apply(const struct dt_checkpoint *ck, struct dt_model *m);

void dt_checkpoint_free(struct dt_checkpoint *ck);

#endif
