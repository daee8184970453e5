/* `fast`'s convolutions through oneDNN where detrain is built with it (DT_HAVE_ONEDNN);
 * conv_dnnl.c says when they apply. Each op returns DT_ERR_UNSUPPORTED, touching nothing,
 * when it does not (no oneDNN, a policy that asks for an order, a forced order, a shape
 * oneDNN refuses): conv.c then runs its own kernels. */
#ifndef DT_CPU_CONV_DNNL_H
#define DT_CPU_CONV_DNNL_H

#include "nets/cpu/cpu.h"

/* The engine and the per-shape primitives; NULL without oneDNN (or when it fails to
 * start). oneDNN runs one call per pool slice, each on one OpenMP thread. */
struct dt_cpu_dnnl *dt_cpu_dnnl_new(void);
/* Was detrain built with oneDNN? (tests: which path the `fast` convolutions take) */
bool dt_cpu_dnnl_built(void);
void dt_cpu_dnnl_free(struct dt_cpu_dnnl *d);

enum dt_status dt_cpu_dnnl_conv_forward(struct dt_backend *be, float *y, const float *x,
                                        const float *w, const float *bias,
                                        const struct dt_conv2d_shape *s,
                                        const struct dt_policy *pol);
enum dt_status dt_cpu_dnnl_conv_backward_data(struct dt_backend *be, float *dx, const float *dy,
                                              const float *w, const struct dt_conv2d_shape *s,
                                              const struct dt_policy *pol);
enum dt_status dt_cpu_dnnl_conv_backward_weight(struct dt_backend *be, float *dw, const float *x,
                                                const float *dy, const struct dt_conv2d_shape *s,
                                                const struct dt_policy *pol);

#endif
