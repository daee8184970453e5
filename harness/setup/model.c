/* The experiment's model and optimizer, built from its config (harness/setup/model.h). */
#include "harness/setup/model.h"

#include "harness/setup/data.h"

#include <string.h>

int64_t dt_experiment_lfsr_check_every(const struct dt_experiment *exp)
{
    if (exp->model.lfsr_check_every > 0) return exp->model.lfsr_check_every;
#ifdef NDEBUG
    return 16;
#else
    return 1;
#endif
}

bool dt_experiment_text(const struct dt_experiment *exp)
{
    return strcmp(exp->dataset.name, "text") == 0;
}

enum dt_status dt_experiment_load_dataset(struct dt_dataset *ds, const struct dt_experiment *exp,
                                          struct dt_error *err)
{
    if (dt_experiment_text(exp))
        return dt_dataset_load_text(ds, exp->dataset.path, exp->model.context,
                                    exp->dataset.train_limit, exp->dataset.test_limit, err);
    return dt_dataset_load_fashion_mnist(ds, exp->dataset.path, exp->dataset.train_limit,
                                         exp->dataset.test_limit, err);
}

struct dt_model_spec dt_experiment_model_spec(const struct dt_experiment *exp, int64_t n_train)
{
    /* Fashion-MNIST, 28x28 grey images of 10 classes; or a text's windows of context + 1
     * bytes, 256 classes */
    const bool text = dt_experiment_text(exp);
    return (struct dt_model_spec){
        .height = text ? 1 : DT_FASHION_MNIST_SIDE,
        .width = text ? exp->model.context + 1 : DT_FASHION_MNIST_SIDE,
        .channels = 1,
        .n_classes = text ? DT_TEXT_CLASSES : DT_FASHION_MNIST_CLASSES,
        .gpt = {.context = exp->model.context,
                .d_model = exp->model.d_model,
                .heads = exp->model.heads,
                .layers = exp->model.layers,
                .tie_embeddings = exp->model.tie_embeddings,
                .dropout = exp->model.dropout,
                .lfsr_check_every = dt_experiment_lfsr_check_every(exp)},
        .batch = exp->train.batch,
        .hidden = exp->model.hidden,
        .n_hidden = exp->model.n_hidden,
        .overlap_pool = exp->model.overlap_pool,
        .layers = exp->model.network,
        .n_layers = exp->model.n_network,
        .bnn =
            {
                .samples = exp->model.samples,
                .test_samples = exp->model.test_samples,
                .prior_sigma = (float)exp->model.prior_sigma,
                .rho_init = (float)exp->model.rho_init,
                .kl_weight = n_train > 0 ? 1.0f / (float)n_train : 0.0f,
                .lanes = exp->model.lanes,
                .stored_lfsr = exp->model.stored_generator == DT_EPS_GEN_LFSR,
                .lfsr_check_every = dt_experiment_lfsr_check_every(exp),
                .local = exp->model.estimator == DT_BNN_LOCAL,
            },
    };
}

enum dt_status dt_experiment_build_model(struct dt_model **m, const struct dt_experiment *exp,
                                         struct dt_backend *be, int64_t n_train,
                                         struct dt_error *err)
{
    const struct dt_model_spec spec = dt_experiment_model_spec(exp, n_train);
    DT_FORWARD_IF_ERROR(dt_model_kind(exp->model.kind)->create(m, be, &spec, err));
    (*m)->tree_digest = exp->hash.digest == DT_HASH_DIGEST_TREE;
    return DT_OK;
}

struct dt_sgd_options dt_experiment_sgd_options(const struct dt_experiment *exp)
{
    struct dt_sgd_options o = {.lr = (float)exp->train.optimizer.lr,
                               .momentum = (float)exp->train.optimizer.momentum,
                               .weight_decay = (float)exp->train.optimizer.weight_decay,
                               .adamw = exp->train.optimizer.kind == DT_OPTIMIZER_ADAMW,
                               .beta1 = (float)exp->train.optimizer.beta1,
                               .beta2 = (float)exp->train.optimizer.beta2,
                               .eps = (float)exp->train.optimizer.eps,
                               .clip_norm = (float)exp->train.optimizer.clip_norm,
                               .warmup = exp->train.optimizer.warmup,
                               .total_steps = exp->train.steps,
                               .cosine = exp->train.optimizer.schedule == DT_LR_COSINE};
    return o;
}

enum dt_status dt_experiment_open_backend(struct dt_backend **be, const struct dt_experiment *exp,
                                          int gpu_offset, struct dt_error *err)
{
    const struct dt_backend_options bopt = {
        .kind = exp->backend.device == DT_DEVICE_CUDA ? DT_BACKEND_CUDA : DT_BACKEND_CPU,
        .threads = exp->backend.threads,
        .gpu = exp->backend.gpu + gpu_offset};
    *be = NULL;
    DT_FORWARD_IF_ERROR(dt_backend_create(be, &bopt, err));
    const char *missing = dt_backend_missing_op(*be);
    if (!missing) return DT_OK;
    enum dt_status st = dt_error_set(err, DT_ERR_UNSUPPORTED,
                                     "backend '%s': op %s is not implemented in this version; "
                                     "use backend.device: cpu",
                                     dt_backend_name(*be), missing);
    dt_backend_destroy(*be);
    *be = NULL;
    return st;
}
