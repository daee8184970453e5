/* The cost model's arithmetic and device constants (nets/cost.h); the per-op counts are in
 * nets/cost_cuda.c, recorded by the CUDA backend's own code (nets/cuda/work.h). */
#include "nets/cost.h"

#include <string.h>

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

/* The H200 (141 GB HBM3e), fitted to its first window's per-op times (results/nvidia-h200,
 * git 68364af; the fit: results/cpu/cost-model/h200-check.txt, the model of that code beside
 * them). From the GPU-scale GPT's large ops, where work and not launches sets the time:
 * bandwidth from LayerNorm, the residual add and AdamW (0.25 to 0.63 ms for 0.3 to 1.6 GB:
 * 2.5 to 2.6 TB/s, a little over half the datasheet's 4.8 TB/s); cuBLAS's rates from the
 * dense ops' 351 GFLOP at fast (3.09 ms: TF32) and run_to_run (9.32 ms: pedantic FP32), the
 * bytes' time taken off; the ordered product's from `portable`'s dense forward (74.4 ms for
 * the same flops), a rate of the 16 x 16 kernel that ran then -- today's wide tiles for large
 * products (nets/cuda/gemm_tile.h) are untimed, so `portable`'s dense predictions are upper
 * bounds until a window times them. From the small models' ops, where launches set it: 5 us a
 * kernel (ReLU, the loss gradient: one or two launches each) and 15 us a cuBLAS call (the
 * MLP's dense ops at fast). The host wait, the CUDA cores' rate, a thread's serial rate and
 * the int8 rate (not timed on the H200) stay the H100's: the same Hopper SMs. */
const struct dt_cost_device dt_cost_h200 = {
    .name = "NVIDIA H200 (model)",
    .launch_s = 5.0e-6,
    .lib_launch_s = 15e-6,
    .graph_launch_s = 1.5e-6,
    .wait_s = 12e-6,
    .bytes_per_s = 2.6e12,
    .flops_per_s = 25e12,
    .ordered_flops_per_s = 4.85e12,
    .serial_ops_per_s = 1.0e9,
    .lib_fp32_per_s = 48e12,
    .lib_tf32_per_s = 330e12,
    .int8_per_s = 800e12,
};

const struct dt_cost_device *dt_cost_device_named(const char *name)
{
    if (!name) return NULL;
    if (strcmp(name, "h200") == 0) return &dt_cost_h200;
    if (strcmp(name, "h100") == 0) return &dt_cost_h100;
    return NULL;
}

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
