/* The experiment's model and optimizer, built from its config (harness/setup/model.h). */
#include "harness/setup/model.h"

int64_t dt_experiment_lfsr_check_every(const struct dt_experiment *exp)
{
    if (exp->model.lfsr_check_every > 0) return exp->model.lfsr_check_every;
#ifdef NDEBUG
    return 16;
#else
    return 1;
#endif
}

enum dt_status dt_experiment_build_model(struct dt_model **m, const struct dt_experiment *exp,
                                         struct dt_backend *be, int64_t n_train,
                                         struct dt_error *err)
{
    switch (exp->model.kind) {
    case DT_MODEL_BNN_MLP: {
        struct dt_bnn_options o = {
            .samples = exp->model.samples,
            .test_samples = exp->model.test_samples,
            .prior_sigma = (float)exp->model.prior_sigma,
            .rho_init = (float)exp->model.rho_init,
            .kl_weight = n_train > 0 ? 1.0f / (float)n_train : 0.0f,
            .lanes = exp->model.lanes,
            .stored_lfsr = exp->model.stored_generator == DT_EPS_GEN_LFSR,
            .lfsr_check_every = dt_experiment_lfsr_check_every(exp),
        };
        return dt_bnn_mlp_create(m, be, 784, exp->model.hidden, exp->model.n_hidden, 10,
                                 exp->train.batch, &o, err);
    }
    case DT_MODEL_MLP:
        return dt_mlp_create(m, be, 784, exp->model.hidden, exp->model.n_hidden, 10,
                             exp->train.batch, err);
    case DT_MODEL_LENET:
        return dt_lenet_create(m, be, 28, 28, exp->model.overlap_pool, 10, exp->train.batch, err);
    }
    return dt_error_set(err, DT_ERR_CONFIG, "unknown model kind");
}

struct dt_sgd_options dt_experiment_sgd_options(const struct dt_experiment *exp)
{
    struct dt_sgd_options o = {(float)exp->train.optimizer.lr, (float)exp->train.optimizer.momentum,
                               (float)exp->train.optimizer.weight_decay};
    return o;
}
