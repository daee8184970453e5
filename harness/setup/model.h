/* From the experiment's config to what the run steps: the model on a backend and the
 * optimizer settings (docs/DESIGN.md "Data path": setup -> run). Shared by training, the
 * overhead protocol, `detrain bench` and the tests. */
#ifndef DT_SETUP_MODEL_H
#define DT_SETUP_MODEL_H

#include <stdint.h>

#include "core/status.h"
#include "harness/setup/config.h"
#include "harness/setup/data.h"
#include "nets/backend.h"
#include "nets/model.h"
#include "nets/models.h"

/* The spec its model kind is built from (nets/models.h): the dataset's shape and the model
 * keys. n_train (training examples) sets a Bayesian model's KL weight, 1 / n_train. */
struct dt_model_spec dt_experiment_model_spec(const struct dt_experiment *exp, int64_t n_train);
/* Whether the experiment trains on text (dataset.name: text). */
bool dt_experiment_text(const struct dt_experiment *exp);
/* The experiment's dataset: Fashion-MNIST, or a text cut into windows of model.context + 1
 * bytes (harness/setup/data.h). */
enum dt_status dt_experiment_load_dataset(struct dt_dataset *ds, const struct dt_experiment *exp,
                                          struct dt_error *err);

/* Create the experiment's model on a backend, by its kind's row (nets/models.h). n_train (training
 * examples) sets a Bayesian model's KL weight, 1 / n_train. */
enum dt_status dt_experiment_build_model(struct dt_model **m, const struct dt_experiment *exp,
                                         struct dt_backend *be, int64_t n_train,
                                         struct dt_error *err);

/* The optimizer settings of the experiment, as the model step takes them. */
struct dt_sgd_options dt_experiment_sgd_options(const struct dt_experiment *exp);

/* The experiment's backend (backend.device, .threads, and GPU backend.gpu + gpu_offset: a
 * rank's place on its machine), refused (DT_ERR_UNSUPPORTED, nothing left open) when it lacks
 * an op: "backend 'cuda': op conv2d_forward is not implemented in this version". */
enum dt_status dt_experiment_open_backend(struct dt_backend **be, const struct dt_experiment *exp,
                                          int gpu_offset, struct dt_error *err);

/* The lane-check period model.lfsr_check_every resolves to (0 = every step in Debug
 * builds, every 16th otherwise). */
int64_t dt_experiment_lfsr_check_every(const struct dt_experiment *exp);

#endif
