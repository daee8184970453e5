"""nets/gpt.c's transformer in PyTorch, shared by scripts/gpt_vs_torch.py (the step-by-step
replay of a detrain run) and scripts/bench_torch.py (PyTorch's step time on the same
model): one definition, so the model both compare against is the same. It is also the
ready module for a GPT that `detrain export` wrote (docs/cli.md, "Load it in PyTorch"):

    import torch_gpt
    net, cfg = torch_gpt.from_safetensors("gpt.safetensors")   # the file alone
    windows = torch_gpt.validation_windows(cfg)                  # detrain's validation split
    loss, acc, last = torch_gpt.evaluate(net, windows)

and, as a command, checks such a file against the result it came from:

    python3 scripts/torch_gpt.py gpt.safetensors --replica DIR/portable/replica-0

rebuilds the model from the file alone, evaluates the validation windows and compares the
loss and accuracy with the replica's run.json (relative tolerance --tol) and every
prediction with its predictions.csv. Exit 0 when they agree, 1 when not, 2 on bad input.

Parameters carry detrain's names and layouts (dense weights [in, out], used as x @ W):
wte (256, D), wpe (T, D), per block h<l>.ln1.weight/.bias, h<l>.attn.qkv.weight (D, 3D),
.qkv.bias, h<l>.attn.proj.weight (D, D), .proj.bias, h<l>.ln2.weight/.bias,
h<l>.mlp.fc.weight (D, 4D), .fc.bias, h<l>.mlp.proj.weight (4D, D), .proj.bias, then
ln_f.weight/.bias and lm_head.weight (D, 256) when the head is not tied.
"""
import argparse
import csv
import json
import math
import os
import struct
import sys

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


DEFAULT_CORPUS = "/usr/share/games/fortunes"  # dataset.path's default (harness/setup/data.c)


def read_text(path):
    """The whole corpus detrain reads (harness/setup/data.c, dt_dataset_load_text): a file,
    or a folder's files in byte order of their names without hidden ones, .dat and .u8."""
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
    return data


def read_corpus(path):
    """The training bytes: the corpus but its last tenth (len // 10 bytes: validation)."""
    data = read_text(path)
    return data[:len(data) - len(data) // 10]


def read_safetensors(path):
    """A safetensors file's F32 tensors (name -> tensor) and its __metadata__."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"{path}: not a safetensors file (header length {n} past its end)")
    header = json.loads(data[8:8 + n])
    base = 8 + n
    meta = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        if t["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} is {t['dtype']}, expected F32")
        a, b = t["data_offsets"]
        buf = bytearray(data[base + a:base + b])
        out[name] = torch.frombuffer(buf, dtype=torch.float32).reshape(t["shape"]).clone()
    return out, meta


def from_safetensors(path):
    """The GPT a `detrain export` file describes, rebuilt from the file alone: its sizes
    from the metadata's resolved config (heads, context, tie_embeddings among them), its
    weights by name. Returns (module in eval mode, the config as a dict)."""
    w, meta = read_safetensors(path)
    if meta.get("model.kind") != "gpt":
        raise ValueError(f"{path}: model.kind is {meta.get('model.kind')!r}, not gpt "
                         "(a detrain export of a GPT replica or checkpoint)")
    if "config" not in meta:
        raise ValueError(f"{path}: no config in its metadata (exported by a detrain older "
                         "than the self-describing export)")
    cfg = json.loads(meta["config"])
    m = cfg["model"]
    T, D, H, L = m["context"], m["d_model"], m["heads"], m["layers"]
    tie = m.get("tie_embeddings", True)
    want = dict(param_shapes(T, D, L, tie))
    got = {k: tuple(v.shape) for k, v in w.items()}
    if got != want:
        diff = sorted(set(got.items()) ^ set(want.items()))
        raise ValueError(f"{path}: tensors differ from the config's GPT: {diff[:4]}")
    net = GPT(w, T, D, H, L, tie)
    net.eval()
    return net, cfg


def validation_windows(cfg, corpus=None):
    """detrain's validation split for a GPT config (harness/setup/data.c): the corpus's last
    tenth cut into windows of context + 1 bytes at offsets 0, context, 2 context, ...
    (dataset.test_limit of them when set). corpus: the text's path (default: the config's
    dataset.path, else Debian's fortunes). Returns a LongTensor (windows, context + 1)."""
    T = cfg["model"]["context"]
    path = corpus or cfg.get("dataset", {}).get("path") or DEFAULT_CORPUS
    data = read_text(path)
    val = data[len(data) - len(data) // 10:]
    n = (len(val) - 1) // T
    limit = cfg.get("dataset", {}).get("test_limit", 0) or 0
    if 0 < limit < n:
        n = limit
    if n < 1:
        raise ValueError(f"{path}: {len(data)} bytes: no validation window of {T + 1} bytes")
    v = torch.tensor(list(val[:(n - 1) * T + T + 1]), dtype=torch.long)
    return torch.stack([v[i * T:i * T + T + 1] for i in range(n)])


@torch.no_grad()
def evaluate(net, windows, batch=64):
    """detrain's test_loss and test_accuracy (every position of every window: mean
    cross-entropy in nats per byte, share of positions whose argmax is the next byte) and
    each window's last-position prediction (predictions.csv's predicted column)."""
    total, right, count, last = 0.0, 0, 0, []
    for i in range(0, len(windows), batch):
        win = windows[i:i + batch]
        logits = net(win[:, :-1]).double()
        y = win[:, 1:]
        total += float(F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1),
                                       reduction="sum"))
        pred = logits.argmax(dim=-1)
        right += int((pred == y).sum())
        count += y.numel()
        last += pred[:, -1].tolist()
    return total / count, right / count, last


def check_against(path, replica, corpus, tol, pred_tol=0.0):
    """main's comparison: 0 when loss, accuracy and every prediction agree, else 1."""
    net, cfg = from_safetensors(path)
    windows = validation_windows(cfg, corpus)
    loss, acc, last = evaluate(net, windows)
    print(f"{path}: {len(windows)} validation windows of {windows.shape[1]} bytes: "
          f"loss {loss:.9g} nats/byte, accuracy {acc:.6f} (PyTorch {torch.__version__})")
    if not replica:
        return 0
    with open(os.path.join(replica, "run.json")) as f:
        run = json.load(f)
    ok = True
    rel = abs(loss - run["test_loss"]) / abs(run["test_loss"])
    print(f"detrain's run.json: loss {run['test_loss']:.9g}, relative difference {rel:.2e} "
          f"(tolerance {tol:g})")
    ok &= rel <= tol
    print(f"detrain's run.json: accuracy {run['test_accuracy']:.6f} (PyTorch {acc:.6f})")
    ok &= abs(acc - run["test_accuracy"]) <= 1e-6 + 1.0 / windows.numel() + pred_tol
    with open(os.path.join(replica, "predictions.csv")) as f:
        det = [int(r["predicted"]) for r in csv.DictReader(f)]
    same = sum(a == b for a, b in zip(det, last))
    print(f"predictions.csv: {same} of {len(det)} last-position predictions equal "
          f"({len(last)} windows here)")
    # a near tie may fall the other way where PyTorch's kernels round otherwise (another
    # CPU's): --pred-tol allows that share of predictions to differ (default none)
    ok &= len(det) == len(last) and len(det) - same <= pred_tol * len(det)
    print("agree" if ok else "DISAGREE")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(
        description="Rebuild a detrain-exported GPT in PyTorch from the file alone and "
        "evaluate detrain's validation split; with --replica, compare with its result.")
    ap.add_argument("file", help="a .safetensors file `detrain export` wrote from a GPT")
    ap.add_argument("--replica", help="the replica folder it came from (run.json, "
                    "predictions.csv): compare loss, accuracy and every prediction")
    ap.add_argument("--corpus", help="the text (default: the config's dataset.path, else "
                    f"{DEFAULT_CORPUS})")
    ap.add_argument("--tol", type=float, default=1e-5,
                    help="relative tolerance on the loss (default 1e-5)")
    ap.add_argument("--pred-tol", type=float, default=0.0,
                    help="the share of last-position predictions allowed to differ (near ties "
                    "on another CPU's kernels; default 0)")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's)")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    try:
        sys.exit(check_against(a.file, a.replica, a.corpus, a.tol, a.pred_tol))
    except (OSError, ValueError, KeyError) as e:
        print(f"torch_gpt: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
