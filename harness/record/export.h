/* `detrain export`: a model's weights in the safetensors format (the ecosystem's weight
 * file: an 8-byte little-endian header length, a JSON header naming every tensor's dtype,
 * shape and byte range, then the raw little-endian values), readable by PyTorch,
 * `safetensors` and every framework that loads it.
 *
 * The weights come from a checkpoint (checkpoint.bin or divergence.bin: names and shapes
 * inside) or from a replica folder's snapshot at a step (shapes from the experiment's
 * config.json, found in the folder's parents, by building the model). Tensors keep
 * detrain's names and shapes ("wte", "h0.attn.qkv.weight", "dense0.weight"); dense weights
 * are [in, out] (the transpose of a torch.nn.Linear weight), convolution weights HWIO. The
 * header's __metadata__ says so, with the step, the model kind and the source. */
#ifndef DT_EXPORT_H
#define DT_EXPORT_H

#include <stdint.h>

#include "core/status.h"

/* Write `out_path` (refused when it exists, so nothing is overwritten by mistake, or when
 * it lies inside `src` or the result around it: dt_out_file_check) from
 * `src`: a checkpoint file, or a replica folder's snapshot at `step` (-1: its last one).
 * DT_ERR_USAGE / DT_ERR_IO / DT_ERR_DATA name the file and what is wrong. */
enum dt_status dt_export_safetensors(const char *src, int64_t step, const char *out_path,
                                     struct dt_error *err);

#endif
