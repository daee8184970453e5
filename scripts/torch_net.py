"""detrain's networks described in a config (model.kind: net, nets/net.c) in PyTorch: the
module scripts/net_vs_torch.py replays and scripts/bench_torch.py times.

Net(network, w) runs config.json's model.network on NCHW images with the tensors w, named
and shaped as detrain names them (`detrain export`): convolutions HWIO, dense layers
(in, out), a flatten in detrain's (h, w, c) order. forward(x, training, shards) normalises
each group of rows in `shards` (a list of row counts) by its own statistics in training --
detrain's canonical shards, or [B] for PyTorch's default batch normalisation -- and by the
running statistics otherwise. init_weights(network) makes tensors of those names and shapes
for timing (detrain's initial distributions, not its bits).
"""
import math

import torch
import torch.nn.functional as F

EPS, MOMENTUM = 1e-5, 0.1  # nets/batchnorm_elem.h: DT_BN_EPS, DT_BN_MOMENTUM


def kind_of(layer):
    """A layer of config.json's model.network: its kind and its mapping (or {})."""
    if isinstance(layer, str):
        return layer, {}
    for k in ("dense", "conv", "maxpool", "avgpool", "dropout", "residual"):
        if k in layer:
            return k, layer
    raise ValueError(f"unknown layer {layer!r}")


class Net:
    """detrain's layer list in PyTorch, its tensors named as detrain names them."""

    def __init__(self, network, w):
        self.w = {k: v.clone().requires_grad_(True) for k, v in w.items()
                  if not k.endswith(("running_mean", "running_var"))}
        self.buf = {k: v.clone() for k, v in w.items() if k.endswith(("running_mean", "running_var"))}
        self.count = {}
        self.n_proj = 0
        self.plan = self.name(network)  # [(kind, spec, tensor prefix, branch plan)]

    def name(self, layers):
        plan = []
        for layer in layers:
            kind, spec = kind_of(layer)
            number = self.count.get(kind, 0)
            self.count[kind] = number + 1
            if kind == "residual":
                branch = self.name(spec["residual"])  # the branch's layers are numbered first
                proj = None
                if spec.get("shortcut", "identity") == "projection":
                    proj = f"proj{self.n_proj}"  # numbered as the block closes
                    self.n_proj += 1
                plan.append((kind, spec, proj, branch))
            else:
                plan.append((kind, spec, f"{kind}{number}", None))
        return plan

    def parameters(self):
        return list(self.w.values())

    def forward(self, x, training, shards):
        return self.apply(self.plan, x, training, shards)

    def apply(self, plan, x, training, shards):
        for kind, spec, name, branch in plan:
            if kind == "residual":
                y = self.apply(branch, x, training, shards)
                if name:  # a 1x1 projection striding as the branch does
                    stride = next(s for s in range(1, 65) if (x.shape[2] - 1) // s + 1 == y.shape[2])
                    x = F.conv2d(x, self.w[name + ".weight"].permute(3, 2, 0, 1),
                                 self.w[name + ".bias"], stride=stride)
                x = y + x
            elif kind == "conv":
                x = F.conv2d(x, self.w[name + ".weight"].permute(3, 2, 0, 1),
                             self.w[name + ".bias"], stride=spec.get("stride", 1),
                             padding=spec.get("pad", 0))
            elif kind == "dense":
                if x.dim() == 4:
                    x = x.reshape(x.shape[0], -1)
                x = x @ self.w[name + ".weight"] + self.w[name + ".bias"]
            elif kind == "relu":
                x = F.relu(x)
            elif kind == "gelu":
                x = F.gelu(x, approximate="tanh")
            elif kind == "maxpool":
                x = F.max_pool2d(x, spec["maxpool"], spec.get("stride", spec["maxpool"]),
                                 spec.get("pad", 0))
            elif kind == "avgpool":
                x = F.avg_pool2d(x, spec["avgpool"], spec.get("stride", spec["avgpool"]),
                                 spec.get("pad", 0), count_include_pad=True)
            elif kind == "global_avgpool":
                x = x.mean(dim=(2, 3))
            elif kind == "flatten":
                x = x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)  # (h, w, c) order
            elif kind == "layernorm":
                x = F.layer_norm(x.permute(0, 2, 3, 1), (x.shape[1],), self.w[name + ".weight"],
                                 self.w[name + ".bias"], 1e-5).permute(0, 3, 1, 2)
            elif kind == "batchnorm":
                rm, rv = self.buf[name + ".running_mean"], self.buf[name + ".running_var"]
                g, b = self.w[name + ".weight"], self.w[name + ".bias"]
                if training:  # each shard by its own statistics, in shard order
                    x = torch.cat([F.batch_norm(part, rm, rv, g, b, True, MOMENTUM, EPS)
                                   for part in torch.split(x, shards)])
                else:
                    x = F.batch_norm(x, rm, rv, g, b, False, MOMENTUM, EPS)
            elif kind == "dropout":
                raise ValueError("dropout: PyTorch cannot draw detrain's masks")
            else:
                raise ValueError(f"layer kind {kind} is not mirrored here")
        return x

def init_weights(network, C=1, H=28, W=28, seed=0):
    """Tensors of detrain's names and shapes for network on H x W x C images: weights
    U(-sqrt(6 / fan_in), +sqrt(6 / fan_in)), biases 0, normalisations' gamma 1, running
    statistics 0 and 1."""
    g = torch.Generator().manual_seed(seed)
    w = {}

    def uniform(shape, fan_in):
        b = math.sqrt(6.0 / fan_in)
        return (torch.rand(shape, generator=g) * 2 - 1) * b

    def walk(plan, c, h, wd):
        for kind, spec, name, branch in plan:
            if kind == "residual":
                c2, h2, w2 = walk(branch, c, h, wd)
                if name:
                    w[name + ".weight"] = uniform((1, 1, c, c2), c)
                    w[name + ".bias"] = torch.zeros(c2)
                c, h, wd = c2, h2, w2
            elif kind == "conv":
                k, st, pad = spec["kernel"], spec.get("stride", 1), spec.get("pad", 0)
                w[name + ".weight"] = uniform((k, k, c, spec["conv"]), k * k * c)
                w[name + ".bias"] = torch.zeros(spec["conv"])
                c, h, wd = spec["conv"], (h + 2 * pad - k) // st + 1, (wd + 2 * pad - k) // st + 1
            elif kind in ("maxpool", "avgpool"):
                k = spec[kind]
                st, pad = spec.get("stride", k), spec.get("pad", 0)
                h, wd = (h + 2 * pad - k) // st + 1, (wd + 2 * pad - k) // st + 1
            elif kind == "dense":
                n_in = c * h * wd
                w[name + ".weight"] = uniform((n_in, spec["dense"]), n_in)
                w[name + ".bias"] = torch.zeros(spec["dense"])
                c, h, wd = spec["dense"], 1, 1
            elif kind in ("global_avgpool", "flatten"):
                c, h, wd = (c if kind == "global_avgpool" else c * h * wd), 1, 1
            elif kind in ("batchnorm", "layernorm"):
                w[name + ".weight"] = torch.ones(c)
                w[name + ".bias"] = torch.zeros(c)
                if kind == "batchnorm":
                    w[name + ".running_mean"] = torch.zeros(c)
                    w[name + ".running_var"] = torch.ones(c)
        return c, h, wd
    walk(Net(network, {}).plan, C, H, W)
    return w
