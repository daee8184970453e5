"""nets/gpt.c's transformer in PyTorch, shared by scripts/gpt_vs_torch.py (the step-by-step
replay of a detrain run) and scripts/bench_torch.py (PyTorch's step time on the same
model): one definition, so the model both compare against is the same.

Parameters carry detrain's names and layouts (dense weights [in, out], used as x @ W):
wte (256, D), wpe (T, D), per block h<l>.ln1.weight/.bias, h<l>.attn.qkv.weight (D, 3D),
.qkv.bias, h<l>.attn.proj.weight (D, D), .proj.bias, h<l>.ln2.weight/.bias,
h<l>.mlp.fc.weight (D, 4D), .fc.bias, h<l>.mlp.proj.weight (4D, D), .proj.bias, then
ln_f.weight/.bias and lm_head.weight (D, 256) when the head is not tied.
"""
import math
import os

import torch
import torch.nn.functional as F

VOCAB = 256


def param_shapes(T, D, L, tie):
    """Every parameter's name and shape, in detrain's digest order."""
    shapes = [("wte", (VOCAB, D)), ("wpe", (T, D))]
    for l in range(L):
        shapes += [(f"h{l}.ln1.weight", (D,)), (f"h{l}.ln1.bias", (D,)),
                   (f"h{l}.attn.qkv.weight", (D, 3 * D)), (f"h{l}.attn.qkv.bias", (3 * D,)),
                   (f"h{l}.attn.proj.weight", (D, D)), (f"h{l}.attn.proj.bias", (D,)),
                   (f"h{l}.ln2.weight", (D,)), (f"h{l}.ln2.bias", (D,)),
                   (f"h{l}.mlp.fc.weight", (D, 4 * D)), (f"h{l}.mlp.fc.bias", (4 * D,)),
                   (f"h{l}.mlp.proj.weight", (4 * D, D)), (f"h{l}.mlp.proj.bias", (D,))]
    shapes += [("ln_f.weight", (D,)), ("ln_f.bias", (D,))]
    if not tie:
        shapes.append(("lm_head.weight", (D, VOCAB)))
    return shapes


def random_weights(T, D, L, tie, generator):
    """Weights of the right shapes for timing: N(0, 0.02) matrices, LayerNorm gains 1."""
    w = {}
    for name, shape in param_shapes(T, D, L, tie):
        if name.endswith("ln1.weight") or name.endswith("ln2.weight") or name == "ln_f.weight":
            w[name] = torch.ones(shape)
        elif len(shape) == 1:
            w[name] = torch.zeros(shape)
        else:
            w[name] = torch.randn(shape, generator=generator) * 0.02
    return w


def have_sdpa():
    """torch.nn.functional.scaled_dot_product_attention (PyTorch >= 2.0): on a GPU it
    dispatches to FlashAttention or memory-efficient kernels."""
    return hasattr(F, "scaled_dot_product_attention")


class GPT(torch.nn.Module):
    """nets/gpt.c: pre-LayerNorm blocks, causal attention (explicit softmax, or sdpa=True:
    scaled_dot_product_attention), GELU (tanh), dropout p (training only) at the
    embedding's sum and before each residual add, as model.dropout places it."""

    def __init__(self, w, T, D, H, L, tie, sdpa=False, dropout=0.0):
        super().__init__()
        self.T, self.D, self.H, self.L, self.tie = T, D, H, L, tie
        self.sdpa, self.dropout = sdpa, dropout
        self.p = torch.nn.ParameterDict()
        for name, t in w.items():
            self.p[name.replace(".", "__")] = torch.nn.Parameter(t.clone())
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).tril(), persistent=False)

    def g(self, name):
        return self.p[name.replace(".", "__")]

    def drop(self, x):
        return F.dropout(x, self.dropout, self.training) if self.dropout > 0 else x

    def forward(self, tokens):
        B, T = tokens.shape
        D, H = self.D, self.H
        h = self.drop(self.g("wte")[tokens] + self.g("wpe")[:T])
        for l in range(self.L):
            P = lambda s: self.g(f"h{l}.{s}")
            x = F.layer_norm(h, (D,), P("ln1.weight"), P("ln1.bias"), 1e-5)
            qkv = x @ P("attn.qkv.weight") + P("attn.qkv.bias")
            q, k, v = qkv.split(D, dim=2)
            q = q.view(B, T, H, D // H).transpose(1, 2)
            k = k.view(B, T, H, D // H).transpose(1, 2)
            v = v.view(B, T, H, D // H).transpose(1, 2)
            if self.sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                a = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D // H))
                a = a.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(dim=-1)
                y = a @ v
            y = y.transpose(1, 2).reshape(B, T, D)
            h = h + self.drop(y @ P("attn.proj.weight") + P("attn.proj.bias"))
            x = F.layer_norm(h, (D,), P("ln2.weight"), P("ln2.bias"), 1e-5)
            x = F.gelu(x @ P("mlp.fc.weight") + P("mlp.fc.bias"), approximate="tanh")
            h = h + self.drop(x @ P("mlp.proj.weight") + P("mlp.proj.bias"))
        h = F.layer_norm(h, (D,), self.g("ln_f.weight"), self.g("ln_f.bias"), 1e-5)
        head = self.g("wte").t() if self.tie else self.g("lm_head.weight")
        return h @ head


def lr_at(step, lr, warmup, total, cosine):
    """nets/model.c, dt_model_lr."""
    if warmup > 0 and step <= warmup:
        return lr * step / warmup
    if cosine and total > warmup:
        progress = min(1.0, (step - warmup - 1) / (total - warmup))
        return lr * 0.5 * (1.0 + math.cos(math.pi * progress))
    return lr


def read_corpus(path):
    """The training bytes detrain reads (harness/setup/data.c, dt_dataset_load_text): a
    file, or a folder's files in byte order of their names without hidden ones, .dat and
    .u8; the last 10% are validation and left out."""
    if os.path.isdir(path):
        chunks = []
        for name in sorted(os.listdir(path), key=lambda s: s.encode()):
            if name.startswith(".") or name.endswith(".dat") or name.endswith(".u8"):
                continue
            p = os.path.join(path, name)
            if os.path.isfile(p) and os.access(p, os.R_OK):
                with open(p, "rb") as f:
                    chunks.append(f.read())
        data = b"".join(chunks)
    else:
        with open(path, "rb") as f:
            data = f.read()
    n_val = len(data) // 10
    return data[:len(data) - n_val]
