/* The cost model's arithmetic and device constants (nets/cost.h); the per-op counts are in
 * nets/cuda/cost.c. */
#include "nets/cost.h"

/* The H100 SXM 80 GB HBM3. Datasheet peaks (NVIDIA H100 Tensor Core GPU datasheet, SXM):
 * 3.35 TB/s HBM3, 67 TFLOPS FP32, 494.7 TFLOPS TF32 and 1979 TOPS int8 dense (989/3958 with
 * sparsity); achievable fractions as commonly measured for streaming kernels (~80% of
 * bandwidth) and cuBLAS at these small shapes (far below peak: the first light's products
 * are launch-bound, so these matter only for the GPU-scale GPT). launch_s and wait_s are
 * fitted to the first light's per-op and step times (results/cpu/cost-model/README.md says
 * how): an op timed by events that launches k kernels back to back costs ~k * launch_s
 * when its kernels are small; a wait adds the host's round trip. graph_launch_s: a kernel
 * node of a replayed CUDA graph (NVIDIA's CUDA graphs blog and the programming guide give
 * ~1-2 us per node for short kernels against ~3-5 us per stream launch). */
const struct dt_cost_device dt_cost_h100 = {
    .name = "NVIDIA H100 80GB HBM3 (model)",
    .launch_s = 4.6e-6,
    .lib_launch_s = 8.5e-6,
    .graph_launch_s = 1.5e-6,
    .wait_s = 12e-6,
    .bytes_per_s = 2.7e12,
    .flops_per_s = 25e12,
    .ordered_flops_per_s = 2.5e12,
    .serial_ops_per_s = 1.0e9,
    .lib_fp32_per_s = 30e12,
    .lib_tf32_per_s = 200e12,
    .int8_per_s = 800e12,
};

void dt_cost_accumulate(struct dt_op_cost *to, const struct dt_op_cost *c)
{
    to->launches += c->launches;
    to->lib_calls += c->lib_calls;
    to->bytes += c->bytes;
    to->flops += c->flops;
    to->serial_ops += c->serial_ops;
    to->ordered_flops += c->ordered_flops;
    to->lib_flops += c->lib_flops;
    to->lib_tf32 |= c->lib_tf32;
    to->int_ops += c->int_ops;
    to->waits += c->waits;
    to->calls += c->calls;
}

double dt_cost_predict_s(const struct dt_op_cost *c, const struct dt_cost_device *d, bool graph)
{
    double work = c->bytes / d->bytes_per_s + c->flops / d->flops_per_s +
                  c->ordered_flops / d->ordered_flops_per_s +
                  c->lib_flops / (c->lib_tf32 ? d->lib_tf32_per_s : d->lib_fp32_per_s) +
                  c->int_ops / d->int8_per_s;
    if (c->serial_ops / d->serial_ops_per_s > work) work = c->serial_ops / d->serial_ops_per_s;
    const double launch =
        graph ? c->launches * d->graph_launch_s
              : (c->launches - c->lib_calls) * d->launch_s + c->lib_calls * d->lib_launch_s;
    /* graph: the step's waits are deferred to its end (one per step, counted by the caller) */
    return (work > launch ? work : launch) + (graph ? 0.0 : c->waits * d->wait_s);
}
