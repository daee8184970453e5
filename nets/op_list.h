/* The ops, one row each (docs/DESIGN.md, "Adding an op"). Everything else about an op is
 * generated from its row: the enum (DT_OP_*), the public function dt_<name> (nets/backend.h),
 * its function type dt_<name>_fn and ops-table member (nets/backend_impl.h), each backend's
 * declaration and table entry (nets/cpu/cpu.h, nets/cuda/cuda.h, the two backend_*.c), the
 * wrapper that checks, routes and observes each call (nets/dispatch.c), and the names, phases,
 * outputs and controls that profiles, `detrain bench`, `detrain explain` and the parity
 * table read. What a row does not say is written once beside it: the op's checks and the
 * tensors it hands an observer (nets/dispatch.c, "plans"), its element function
 * (nets/<layer>_elem.h), one CPU body (nets/cpu/<layer>.c), one CUDA body and its tests.
 *
 * A row: X(ENUM, name, PHASE, "outputs", "controls", (parameters), (arguments))
 *   ENUM, name   DT_OP_<ENUM>; dt_<name>, dt_cpu_<name>, dt_cuda_<name>, the member <name>
 *                and the name profiles, bench, parity and explain print.
 *   PHASE        FORWARD, BACKWARD or UPDATE: its phase in a training step (explain's word;
 *                dropout masks in both passes and is listed as forward).
 *   "outputs"    its outputs' names in the order the op hands them to an observer,
 *                '|'-separated (explain's tensor names after the layer or parameter: "dense1
 *                input gradient"; an index past the last takes the last).
 *   "controls"   the determinism controls that may change its bits ('|'-separated, "" none):
 *                reduction, atomics, math, conv_algo. Every other control leaves them alone,
 *                which tests/test_parity.c checks op by op (`controls_not_listed_change_nothing`).
 *   (parameters) after `struct dt_backend *be`: outputs, inputs, sizes, policy (nets/backend.h,
 *                "Conventions"); (arguments) the same names, in order.
 * The comment above a row is the op's contract; it opens with the public function's name
 * (`dt_<name>: `), so grep finds the row, and .ctags.d/ops.ctags tags dt_<name>, dt_cpu_<name>,
 * dt_cuda_<name> and dt_<name>_fn here for ctags (scripts/house.py findable checks both).
 * Pointers are backend memory unless a name says host. */
#ifndef DT_OP_LIST_H
#define DT_OP_LIST_H

#define DT_OP_LIST(X)                                                                              \
    /* dt_dense_forward: y = x . w + bias. y is (B,out), x is (B,in), w is (in,out), bias is       \
     * (out). */                                                                                   \
    X(DENSE_FORWARD, dense_forward, FORWARD, "output", "math",                                     \
      (float *y, const float *x, const float *w, const float *bias, int64_t B, int64_t in,         \
       int64_t out, const struct dt_policy *pol),                                                  \
      (y, x, w, bias, B, in, out, pol))                                                            \
    /* dt_dense_backward_data: dx = dy . w^T. dx is (B,in), dy is (B,out), w is (in,out). */       \
    X(DENSE_BACKWARD_DATA, dense_backward_data, BACKWARD, "input gradient", "math",                \
      (float *dx, const float *dy, const float *w, int64_t B, int64_t in, int64_t out,             \
       const struct dt_policy *pol),                                                               \
      (dx, dy, w, B, in, out, pol))                                                                \
    /* dt_dense_backward_weight: dw = x^T . dy (sum over the batch). dw is (in,out), x is (B,in),  \
     * dy is (B,out). */                                                                           \
    X(DENSE_BACKWARD_WEIGHT, dense_backward_weight, BACKWARD, "output", "reduction|math",          \
      (float *dw, const float *x, const float *dy, int64_t B, int64_t in, int64_t out,             \
       const struct dt_policy *pol),                                                               \
      (dw, x, dy, B, in, out, pol))                                                                \
    /* dt_bias_backward: dbias = sum over the batch of dy. dbias is (out), dy is (B,out). */       \
    X(BIAS_BACKWARD, bias_backward, BACKWARD, "output", "reduction|atomics",                       \
      (float *dbias, const float *dy, int64_t B, int64_t out, const struct dt_policy *pol),        \
      (dbias, dy, B, out, pol))                                                                    \
    /* dt_relu_forward: y = max(x, 0) elementwise; y may alias x. n elements. */                   \
    X(RELU_FORWARD, relu_forward, FORWARD, "relu output", "",                                      \
      (float *y, const float *x, int64_t n, const struct dt_policy *pol), (y, x, n, pol))          \
    /* dt_relu_backward: dx = dy where y > 0, else 0; dx may alias dy. */                          \
    X(RELU_BACKWARD, relu_backward, BACKWARD, "gradient through relu", "",                         \
      (float *dx, const float *dy, const float *y, int64_t n, const struct dt_policy *pol),        \
      (dx, dy, y, n, pol))                                                                         \
    /* dt_softmax_xent_forward: probs = softmax(logits) row-wise; *loss_host = mean over the       \
     * batch of                                                                                    \
     * -log(probs[b, labels[b]]); *correct_host (optional) = rows whose argmax (first maximum)     \
     * equals the label. probs, logits are (B,C), labels (B) int32 in [0, C). */                   \
    X(SOFTMAX_XENT_FORWARD, softmax_xent_forward, FORWARD, "probabilities|loss", "reduction|math", \
      (float *probs, float *loss_host, int64_t *correct_host, const float *logits,                 \
       const int32_t *labels, int64_t B, int64_t C, const struct dt_policy *pol),                  \
      (probs, loss_host, correct_host, logits, labels, B, C, pol))                                 \
    /* dt_softmax_xent_backward: dlogits = (probs - onehot(labels)) * (1 / denom), denom >= B:     \
     * the gradient of the mean                                                                    \
     * loss over a batch of `denom` examples -- denom = B for a whole batch, the global batch for  \
     * a shard's rows (nets/step.c). */                                                            \
    X(SOFTMAX_XENT_BACKWARD, softmax_xent_backward, BACKWARD, "logit gradient", "",                \
      (float *dlogits, const float *probs, const int32_t *labels, int64_t B, int64_t C,            \
       int64_t denom, const struct dt_policy *pol),                                                \
      (dlogits, probs, labels, B, C, denom, pol))                                                  \
    /* dt_sgd_update: SGD with momentum and L2 weight decay (PyTorch convention), n elements, in   \
     * place: g' = g + wd * w;  v = momentum * v + g';  w = w - lr * v. */                         \
    X(SGD_UPDATE, sgd_update, UPDATE, "output", "",                                                \
      (float *w, float *v, const float *g, int64_t n, float lr, float momentum,                    \
       float weight_decay, const struct dt_policy *pol),                                           \
      (w, v, g, n, lr, momentum, weight_decay, pol))                                               \
    /* dt_conv2d_forward: y[b,oh,ow,k] = bias[k] + sum over (kh, kw, c) of x[b, oh*stride-pad+kh,  \
     * ow*stride-pad+kw, c]                                                                        \
     * * w[kh,kw,c,k], out-of-image cells contributing zero. The sum runs over the patch in        \
     * (kh, kw, c) order at every level but `math: fast`. */                                       \
    X(CONV2D_FORWARD, conv2d_forward, FORWARD, "output", "math|conv_algo",                         \
      (float *y, const float *x, const float *w, const float *bias,                                \
       const struct dt_conv2d_shape *s, const struct dt_policy *pol),                              \
      (y, x, w, bias, s, pol))                                                                     \
    /* dt_conv2d_backward_data: dx = the gradient w.r.t. x given dy = the gradient w.r.t. y.       \
     * Every input cell receives                                                                   \
     * up to KH*KW contributions (a scatter-add: the `atomics` control). */                        \
    X(CONV2D_BACKWARD_DATA, conv2d_backward_data, BACKWARD, "input gradient",                      \
      "atomics|math|conv_algo",                                                                    \
      (float *dx, const float *dy, const float *w, const struct dt_conv2d_shape *s,                \
       const struct dt_policy *pol),                                                               \
      (dx, dy, w, s, pol))                                                                         \
    /* dt_conv2d_backward_weight: dw = the gradient w.r.t. w: a sum over batch and output          \
     * positions (the `reduction`                                                                  \
     * control). The bias gradient is dt_bias_backward over dy as a (B*OH*OW, K_out) matrix. */    \
    X(CONV2D_BACKWARD_WEIGHT, conv2d_backward_weight, BACKWARD, "output",                          \
      "reduction|math|conv_algo",                                                                  \
      (float *dw, const float *x, const float *dy, const struct dt_conv2d_shape *s,                \
       const struct dt_policy *pol),                                                               \
      (dw, x, dy, s, pol))                                                                         \
    /* dt_maxpool2d_forward: y[b,oh,ow,c] = max over the window; argmax[b,oh,ow,c] = ih * W + iw   \
     * of the winner, the                                                                          \
     * first maximum in (kh, kw) order (ties go to the earliest cell; a NaN wins and stops the     \
     * scan). argmax is backend memory, int32, shaped like y. */                                   \
    X(MAXPOOL2D_FORWARD, maxpool2d_forward, FORWARD, "pool output|pool argmax", "",                \
      (float *y, int32_t *argmax, const float *x, const struct dt_pool2d_shape *s,                 \
       const struct dt_policy *pol),                                                               \
      (y, argmax, x, s, pol))                                                                      \
    /* dt_maxpool2d_backward: dx[b, argmax, c] += dy[b,oh,ow,c]: a scatter-add (the `atomics`      \
     * control) when windows                                                                       \
     * overlap (K > stride); without overlap no cell receives two terms and every control          \
     * gives the same bits. x and y are the forward's input and output: a backend whose            \
     * library recomputes the winners from them (cuDNN, under `conv_algo: autotune` and            \
     * `deterministic`) reads them; the CPU backend and detrain's own kernels use argmax. */       \
    X(MAXPOOL2D_BACKWARD, maxpool2d_backward, BACKWARD, "pool input gradient",                     \
      "atomics|conv_algo",                                                                         \
      (float *dx, const float *dy, const float *x, const float *y, const int32_t *argmax,          \
       const struct dt_pool2d_shape *s, const struct dt_policy *pol),                              \
      (dx, dy, x, y, argmax, s, pol))                                                              \
    /* dt_avgpool2d_forward: y = the mean of each K x K window (dt_avgpool_out: padding cells      \
     * count as zeros, the divisor is K^2), NHWC like max pooling; no control acts. */             \
    X(AVGPOOL2D_FORWARD, avgpool2d_forward, FORWARD, "pool output", "",                            \
      (float *y, const float *x, const struct dt_pool2d_shape *s, const struct dt_policy *pol),    \
      (y, x, s, pol))                                                                              \
    /* dt_avgpool2d_backward: dx[cell] = the output gradients of the windows covering the cell,    \
     * summed in window order, / K^2 (dt_avgpool_cell): a gather per cell, so overlapping          \
     * windows need no scatter-add and every control gives the same bits. */                       \
    X(AVGPOOL2D_BACKWARD, avgpool2d_backward, BACKWARD, "pool input gradient", "",                 \
      (float *dx, const float *dy, const struct dt_pool2d_shape *s, const struct dt_policy *pol),  \
      (dx, dy, s, pol))                                                                            \
    /* dt_global_avgpool_forward: y[b, c] = the mean of x[b, ., ., c] over the HW pixels of one    \
     * image (dt_gap_elem: the sum from +0 in pixel order, one rounding an add, then one           \
     * division by HW -- every level, thread count and device the same bits). x is (B, HW, C)      \
     * NHWC, y (B, C). */                                                                          \
    X(GLOBAL_AVGPOOL_FORWARD, global_avgpool_forward, FORWARD, "pooled output", "",                \
      (float *y, const float *x, int64_t B, int64_t HW, int64_t C, const struct dt_policy *pol),   \
      (y, x, B, HW, C, pol))                                                                       \
    /* dt_global_avgpool_backward: dx[b, p, c] = dy[b, c] / HW (dt_gap_grad_elem): every pixel     \
     * of an image gets its channel's share; no sum, so every control gives the same bits. */      \
    X(GLOBAL_AVGPOOL_BACKWARD, global_avgpool_backward, BACKWARD, "pool input gradient", "",       \
      (float *dx, const float *dy, int64_t B, int64_t HW, int64_t C, const struct dt_policy *pol), \
      (dx, dy, B, HW, C, pol))                                                                     \
    /* dt_batchnorm_forward: batch normalisation in training, the rows of x (rows, C) one group:   \
     * per channel the mean and biased variance over the rows (mean, var: C each; the fixed        \
     * order of nets/batchnorm_elem.h), y = (x - mean) / sqrt(var + eps) * gamma + beta. The       \
     * order follows the rows alone: every level, thread count and device the same bits. */        \
    X(BATCHNORM_FORWARD, batchnorm_forward, FORWARD, "batchnorm output|mean|variance", "",         \
      (float *y, float *mean, float *var, const float *x, const float *gamma, const float *beta,   \
       int64_t rows, int64_t C, float eps, const struct dt_policy *pol),                           \
      (y, mean, var, x, gamma, beta, rows, C, eps, pol))                                           \
    /* dt_batchnorm_backward: dx = the input gradient of the group (through its statistics         \
     * too) from dy, given the forward's mean and var; gx = dy * xhat (rows, C), whose column      \
     * sums are gamma's gradient (dy's are beta's: dt_bias_backward, the batch reductions). */     \
    X(BATCHNORM_BACKWARD, batchnorm_backward, BACKWARD, "batchnorm input gradient|gamma terms",    \
      "",                                                                                          \
      (float *dx, float *gx, const float *dy, const float *x, const float *mean, const float *var, \
       const float *gamma, int64_t rows, int64_t C, float eps, const struct dt_policy *pol),       \
      (dx, gx, dy, x, mean, var, gamma, rows, C, eps, pol))                                        \
    /* dt_batchnorm_inference: y = (x - mean) / sqrt(var + eps) * gamma + beta with the given      \
     * (running) statistics, per element: evaluation's batch normalisation. */                     \
    X(BATCHNORM_INFERENCE, batchnorm_inference, FORWARD, "batchnorm output", "",                   \
      (float *y, const float *x, const float *mean, const float *var, const float *gamma,          \
       const float *beta, int64_t rows, int64_t C, float eps, const struct dt_policy *pol),        \
      (y, x, mean, var, gamma, beta, rows, C, eps, pol))                                           \
    /* dt_batchnorm_running: the running mean and variance (C each) moved towards each of          \
     * `groups` groups' statistics in group order (dt_bn_running; the variance unbiased): group    \
     * g's mean at mean + g * stride, its variance at var + g * stride, its rows those of shard g  \
     * of a batch of `batch` examples of per_example rows (dt_bn_group_rows). */                   \
    X(BATCHNORM_RUNNING, batchnorm_running, UPDATE, "running mean|running variance", "",           \
      (float *rmean, float *rvar, const float *mean, const float *var, int64_t groups,             \
       int64_t stride, int64_t C, int64_t batch, int64_t per_example, float momentum,              \
       const struct dt_policy *pol),                                                               \
      (rmean, rvar, mean, var, groups, stride, C, batch, per_example, momentum, pol))              \
    /* ---- Bayesian layers (Bayes by Backprop) and their epsilon ---------------------------      \
     * A Bayesian tensor has parameters mu and rho; sigma = softplus(rho); a sampled weight is     \
     * w = mu + sigma * eps with eps ~ N(0, 1) drawn by determinism/eps.h. All of these are        \
     * elementwise (or per lane) with a fixed operation order: every policy and thread count       \
     * gives the same bits; `math: portable` selects the portable softplus and exp for sigma and   \
     * its derivative, the other levels the C library's. Epsilon itself is always drawn with       \
     * the portable transform, whatever `math` says: it is the stream's definition. */             \
    /* dt_eps_philox: eps[i] for i in [0, n): element i of the Philox stream s                     \
     * (determinism/philox.h). */                                                                  \
    X(EPS_PHILOX, eps_philox, FORWARD, "epsilon", "",                                              \
      (float *eps, int64_t n, const struct dt_philox_stream *s, const struct dt_policy *pol),      \
      (eps, n, s, pol))                                                                            \
    /* dt_eps_lfsr_seed: Seed `lanes` (backend memory, P states) for (seed, step, member,          \
     * sample). */                                                                                 \
    X(EPS_LFSR_SEED, eps_lfsr_seed, FORWARD, "lane states", "",                                    \
      (struct dt_xoro * lanes, int64_t P, uint64_t seed, uint32_t step, uint32_t member,           \
       uint32_t sample, const struct dt_policy *pol),                                              \
      (lanes, P, seed, step, member, sample, pol))                                                 \
    /* dt_eps_lfsr: Walk every lane over a tensor of n elements, forwards (drawing, then           \
     * stepping) or                                                                                \
     * backwards (stepping back, then drawing), writing eps[0..n). Test hook: skip_lane >= 0       \
     * makes that lane draw one pair fewer on a forward walk (fault injection). */                 \
    X(EPS_LFSR, eps_lfsr, FORWARD, "epsilon|lane states", "",                                      \
      (float *eps, int64_t n, struct dt_xoro *lanes, int64_t P, bool backward, int64_t skip_lane,  \
       const struct dt_policy *pol),                                                               \
      (eps, n, lanes, P, backward, skip_lane, pol))                                                \
    /* dt_bnn_sigma: sigma = softplus(rho), dsigma = d sigma / d rho = 1 / (1 + exp(-rho)). */     \
    X(BNN_SIGMA, bnn_sigma, FORWARD, "sigma|dsigma", "math",                                       \
      (float *sigma, float *dsigma, const float *rho, int64_t n, const struct dt_policy *pol),     \
      (sigma, dsigma, rho, n, pol))                                                                \
    /* dt_bnn_sample: w = mu + sigma * eps (one product, one sum). */                              \
    X(BNN_SAMPLE, bnn_sample, FORWARD, "sampled weights", "",                                      \
      (float *w, const float *mu, const float *sigma, const float *eps, int64_t n,                 \
       const struct dt_policy *pol),                                                               \
      (w, mu, sigma, eps, n, pol))                                                                 \
    /* dt_bnn_accumulate: Add one Monte Carlo sample's weight gradient g: gmu += g; grho += (g *   \
     * eps) * dsigma. With first, assign instead of adding. */                                     \
    X(BNN_ACCUMULATE, bnn_accumulate, BACKWARD, "output", "",                                      \
      (float *gmu, float *grho, const float *g, const float *eps, const float *dsigma, int64_t n,  \
       bool first, const struct dt_policy *pol),                                                   \
      (gmu, grho, g, eps, dsigma, n, first, pol))                                                  \
    /* dt_bnn_finish: Finish the gradients of mu and rho: the sample mean plus the KL term of the  \
     * Gaussian prior N(0, prior_var) weighted by kl_weight:                                       \
     *   gmu  = gmu * inv_samples  + kl_weight * (mu * ipv)                                        \
     *   grho = grho * inv_samples + kl_weight * ((sigma * ipv - 1 / sigma) * dsigma)              \
     * with ipv = 1 / prior_var rounded once. */                                                   \
    X(BNN_FINISH, bnn_finish, BACKWARD, "output", "",                                              \
      (float *gmu, float *grho, const float *mu, const float *sigma, const float *dsigma,          \
       int64_t n, float inv_samples, float kl_weight, float prior_var,                             \
       const struct dt_policy *pol),                                                               \
      (gmu, grho, mu, sigma, dsigma, n, inv_samples, kl_weight, prior_var, pol))                   \
    /* dt_square: y = x * x elementwise (y may alias x), n elements. */                            \
    X(SQUARE, square, FORWARD, "squares", "",                                                      \
      (float *y, const float *x, int64_t n, const struct dt_policy *pol), (y, x, n, pol))          \
    /* dt_bnn_local_forward: The local reparameterisation's sampled pre-activations over (rows,    \
     * width): sd = sqrt(delta), y = gamma + sd * eps, eps the layer's standard normals of the     \
     * rows' global rows (struct dt_noise_site, determinism/noise.h: philox from the counter,      \
     * lfsr walking each row's lane forwards; lanes one per row, lfsr only, else NULL). eps_out,   \
     * when not NULL, gets eps (rng: stored, the regeneration check). y may alias gamma, sd        \
     * delta. Per row: every policy and thread count gives the same bits. */                       \
    X(BNN_LOCAL_FORWARD, bnn_local_forward, FORWARD,                                               \
      "output|standard deviation|noise|lane states", "",                                           \
      (float *y, float *sd, float *eps_out, struct dt_xoro *lanes, const float *gamma,             \
       const float *delta, int64_t rows, int64_t width, const struct dt_noise_site *s,             \
       const struct dt_policy *pol),                                                               \
      (y, sd, eps_out, lanes, gamma, delta, rows, width, s, pol))                                  \
    /* dt_bnn_local_backward: The gradient through the noise's scale over (rows, width):           \
     * t = (dy * eps) / sd (0 where sd is 0), eps regenerated (philox; lfsr walking each row's     \
     * lane back) or read from eps_in (stored; else NULL). eps_out, when not NULL, gets the eps    \
     * used (the regeneration check). Per row: every policy and thread count gives the same        \
     * bits.*/                                                                                     \
    X(BNN_LOCAL_BACKWARD, bnn_local_backward, BACKWARD, "variance gradient|noise|lane states", "", \
      (float *t, float *eps_out, struct dt_xoro *lanes, const float *eps_in, const float *dy,      \
       const float *sd, int64_t rows, int64_t width, const struct dt_noise_site *s,                \
       const struct dt_policy *pol),                                                               \
      (t, eps_out, lanes, eps_in, dy, sd, rows, width, s, pol))                                    \
    /* dt_bnn_local_input_grad: dx = dxm + x * dxv elementwise (dx may alias dxm), n elements:     \
     * the mean's input gradient plus the variance's (dxv = t . (sigma^2)^T). */                   \
    X(BNN_LOCAL_INPUT_GRAD, bnn_local_input_grad, BACKWARD, "input gradient", "",                  \
      (float *dx, const float *dxm, const float *x, const float *dxv, int64_t n,                   \
       const struct dt_policy *pol),                                                               \
      (dx, dxm, x, dxv, n, pol))                                                                   \
    /* dt_bnn_local_scale: grho = (grho * sigma) * dsigma, n elements: the local estimator's       \
     * variance gradient (x^2)^T . t, summed over shards, ranks and samples, made rho's. */        \
    X(BNN_LOCAL_SCALE, bnn_local_scale, BACKWARD, "output", "",                                    \
      (float *grho, const float *sigma, const float *dsigma, int64_t n,                            \
       const struct dt_policy *pol),                                                               \
      (grho, sigma, dsigma, n, pol))                                                               \
    /* dt_exact_sum: The exact sum of the shard partials when one process holds them all           \
     * (struct dt_exact_layout): max_bits (out) = dt_exact_max's maxima, slot 0 = the sums (its    \
     * stages dt_exact_max, _to_fixed and _round, below, serve several ranks). */                  \
    X(EXACT_SUM, exact_sum, BACKWARD, "exact sum|maxima", "",                                      \
      (float *pack, uint32_t *max_bits, const struct dt_exact_layout *L), (pack, max_bits, L))     \
    /* ---- the transformer's ops (gpt; per-element arithmetic in nets/gpt_elem.h) ------------    \
     * Rows are (example, position) pairs, r = b * T + t. Every op but the scatter is a fixed      \
     * order per output element, so the policy changes only `math` (exp, tanh) in them; the        \
     * batch reductions (LayerNorm's gamma and beta, the positional embedding's gradient) are      \
     * dt_bias_backward calls by the model, the products the dense ops. */                         \
    /* dt_embedding_forward: h[r] = wte[tok_r] + wpe[t] (D each) for x (B, T + 1) byte values,     \
     * tok_r = x[b, t]; tokens[r] = tok_r and targets[r] = x[b, t + 1] (int32, B * T each). */     \
    X(EMBEDDING_FORWARD, embedding_forward, FORWARD, "embedding|tokens|targets", "",               \
      (float *h, int32_t *tokens, int32_t *targets, const float *x, const float *wte,              \
       const float *wpe, int64_t B, int64_t T, int64_t D, const struct dt_policy *pol),            \
      (h, tokens, targets, x, wte, wpe, B, T, D, pol))                                             \
    /* dt_embedding_backward: dwte[v] (=, or += with accumulate) the sum of dh[r] over the rows r  \
     * with tokens[r] == v:                                                                        \
     * a scatter-add by token id (the `atomics` control: float adds in arrival order, or exact     \
     * int64 fixed point and one rounding). rows = B * T; dwte is (V, D). A token outside          \
     * [0, V) -- impossible after dt_gpt_token when V = 256 -- is DT_ERR_DATA on the CPU; the      \
     * CUDA kernels skip its row (checking would cost a host wait). */                             \
    X(EMBEDDING_BACKWARD, embedding_backward, BACKWARD, "embedding gradient", "atomics",           \
      (float *dwte, const float *dh, const int32_t *tokens, int64_t rows, int64_t V, int64_t D,    \
       bool accumulate, const struct dt_policy *pol),                                              \
      (dwte, dh, tokens, rows, V, D, accumulate, pol))                                             \
    /* dt_layernorm_forward: LayerNorm of every row of x (rows, D): y, and each row's mean and     \
     * 1/std (rows each). */                                                                       \
    X(LAYERNORM_FORWARD, layernorm_forward, FORWARD, "layernorm output|mean|rstd", "",             \
      (float *y, float *mean, float *rstd, const float *x, const float *gamma, const float *beta,  \
       int64_t rows, int64_t D, const struct dt_policy *pol),                                      \
      (y, mean, rstd, x, gamma, beta, rows, D, pol))                                               \
    /* dt_layernorm_backward: dx = (or += with accumulate) the input gradient of every row; gx =   \
     * dy * xhat (rows, D), whose column sums are gamma's gradient (dy's are beta's). */           \
    X(LAYERNORM_BACKWARD, layernorm_backward, BACKWARD, "layernorm input gradient|gamma terms",    \
      "",                                                                                          \
      (float *dx, float *gx, const float *dy, const float *x, const float *mean,                   \
       const float *rstd, const float *gamma, int64_t rows, int64_t D, bool accumulate,            \
       const struct dt_policy *pol),                                                               \
      (dx, gx, dy, x, mean, rstd, gamma, rows, D, accumulate, pol))                                \
    /* dt_attention_forward: Causal self-attention: qkv (B, T, 3D) -> out (B, T, D), att (B, H,    \
     * T, T) the weights. */                                                                       \
    X(ATTENTION_FORWARD, attention_forward, FORWARD, "attention output|attention weights", "math", \
      (float *out, float *att, const float *qkv, int64_t B, int64_t T, int64_t H, int64_t D,       \
       const struct dt_policy *pol),                                                               \
      (out, att, qkv, B, T, H, D, pol))                                                            \
    /* dt_attention_backward: dqkv (B, T, 3D) from dout (B, T, D); ds (B, H, T, T) is scratch      \
     * (the score gradients). */                                                                   \
    X(ATTENTION_BACKWARD, attention_backward, BACKWARD, "qkv gradient|score gradient", "math",     \
      (float *dqkv, float *ds, const float *dout, const float *att, const float *qkv, int64_t B,   \
       int64_t T, int64_t H, int64_t D, const struct dt_policy *pol),                              \
      (dqkv, ds, dout, att, qkv, B, T, H, D, pol))                                                 \
    /* dt_gelu_forward: y = gelu(x), n elements (y may alias x). */                                \
    X(GELU_FORWARD, gelu_forward, FORWARD, "gelu output", "math",                                  \
      (float *y, const float *x, int64_t n, const struct dt_policy *pol), (y, x, n, pol))          \
    /* dt_gelu_backward: dx = dy * gelu'(x) (dx may alias dy). */                                  \
    X(GELU_BACKWARD, gelu_backward, BACKWARD, "gradient through gelu", "math",                     \
      (float *dx, const float *dy, const float *x, int64_t n, const struct dt_policy *pol),        \
      (dx, dy, x, n, pol))                                                                         \
    /* dt_add: y += x, n elements (a residual connection, or a second gradient). */                \
    X(ADD, add, FORWARD, "sum", "",                                                                \
      (float *y, const float *x, int64_t n, const struct dt_policy *pol), (y, x, n, pol))          \
    /* dt_adamw_update: AdamW on n elements in place (dt_adamw_elem): w, first moment m, second    \
     * moment v. */                                                                                \
    X(ADAMW_UPDATE, adamw_update, UPDATE, "output", "",                                            \
      (float *w, float *m, float *v, const float *g, int64_t n, const struct dt_adamw_step *s,     \
       const struct dt_policy *pol),                                                               \
      (w, m, v, g, n, s, pol))                                                                     \
    /* dt_grad_norm: *norm_sq (backend memory, one float) = the sum of the squares of every        \
     * element of the                                                                              \
     * `count` tensors g[i] (n[i] floats each): the global gradient norm that clipping reads, a    \
     * sum over all parameters under `reduction` -- unordered: per-worker partials added in        \
     * arrival order; fixed: each tensor's squares in the fixed chunks-and-tree order              \
     * (determinism/reduce.h), the tensors' sums in tensor order; exact: every square to int64     \
     * fixed point at one scale, summed exactly, rounded once. */                                  \
    X(GRAD_NORM, grad_norm, UPDATE, "gradient norm", "reduction",                                  \
      (float *norm_sq, const float *const *g, const int64_t *n, int count,                         \
       const struct dt_policy *pol),                                                               \
      (norm_sq, g, n, count, pol))                                                                 \
    /* dt_clip_scale: g *= dt_clip_coef(*norm_sq, max_norm), n elements (norm_sq: backend          \
     * memory). */                                                                                 \
    X(CLIP_SCALE, clip_scale, UPDATE, "clipped gradient", "",                                      \
      (float *g, int64_t n, const float *norm_sq, float max_norm, const struct dt_policy *pol),    \
      (g, n, norm_sq, max_norm, pol))                                                              \
    /* dt_dropout: y = dropout(x) over (rows, width) (y may alias x): forward on activations,      \
     * backward on                                                                                 \
     * their gradients with the same mask. keep: (rows, width) bytes (keep and stored modes,       \
     * else NULL); lanes: one state per row (keep and lfsr modes, else NULL), advanced or          \
     * walked back.                                                                                \
     * Elementwise per row: every policy and thread count gives the same bits. */                  \
    X(DROPOUT, dropout, FORWARD, "dropout output|lane states", "",                                 \
      (float *y, const float *x, uint8_t *keep, struct dt_xoro *lanes, int64_t rows,               \
       int64_t width, const struct dt_dropout_site *s, const struct dt_policy *pol),               \
      (y, x, keep, lanes, rows, width, s, pol))                                                    \
    /* dt_dropout_seed: lanes[r] = dt_dropout_lane_seed(seed, step, member, row0 + r), r in [0,    \
     * rows). */                                                                                   \
    X(DROPOUT_SEED, dropout_seed, FORWARD, "lane states", "",                                      \
      (struct dt_xoro * lanes, int64_t rows, int64_t row0, uint64_t seed, uint32_t step,           \
       uint32_t member, const struct dt_policy *pol),                                              \
      (lanes, rows, row0, seed, step, member, pol))                                                \
    /* dt_tensor_digests: digests (n x 32 bytes, backend memory) = the tree digest                 \
     * (core/tree_hash.h) of each of                                                               \
     * the n tensors (backend memory, counts[t] floats; tensors and counts host arrays) over       \
     * their canonical bytes: a fixed function of the bytes on every backend, so the weights       \
     * are hashed where they are. The caller reads the digests before calling again. */            \
    X(TENSOR_DIGESTS, tensor_digests, UPDATE, "tensor digests", "",                                \
      (uint8_t * digests, const float *const *tensors, const int64_t *counts, int n,               \
       const struct dt_policy *pol),                                                               \
      (digests, tensors, counts, n, pol))                                                          \
    /* dt_matmul_exact: C = A . B (+ bias), exactly in integers, rounded once                      \
     * (determinism/exact_product.h): C                                                            \
     * (M,N) row-major; A (M,K), or stored (K,M) when trans has DT_XP_TA; B (K,N), or stored       \
     * (N,K) with DT_XP_TB; bias (N) or NULL, added to the rounded product. Each row of A and      \
     * column of B is scaled by a power of two and truncated to 28 levels-bit fixed point; every   \
     * output is the integer dot product of those, rounded once -- a fixed function of the         \
     * inputs: no control, thread count, kernel or device changes its bits. levels 1 or 2;         \
     * K <= DT_XP_K_OP_MAX;      a NaN or Inf input is DT_ERR_NUMERIC naming its row or column. */ \
    X(MATMUL_EXACT, matmul_exact, FORWARD, "exact product", "",                                    \
      (float *C, const float *A, const float *B, const float *bias, int64_t M, int64_t K,          \
       int64_t N, int trans, int levels, const struct dt_policy *pol),                             \
      (C, A, B, bias, M, K, N, trans, levels, pol))

/* (parameters) and (arguments) of a row with the backend first: `dt_x DT_OP_PARAMS P`. */
#define DT_OP_PARAMS(...) (struct dt_backend * be, __VA_ARGS__)
#define DT_OP_ARGS(...) (be, __VA_ARGS__)

#endif
