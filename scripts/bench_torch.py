#!/usr/bin/env python3
"""PyTorch reference for detrain's step time: the model of a detrain config trained in
eager mode (cross-entropy, SGD with the config's lr, momentum and weight decay, batch
train.batch), timed per step (median, p10, p90 after warm-up), in several modes, each in
its own process so that no setting leaks into the next. Four models (--model; default: the
config's model.kind):

  mlp    configs/quickstart.yaml by default: 784 -> model.hidden... -> 10, ReLU
  lenet  configs/lenet.yaml by default, as nets/lenet.c: conv 5x5 1->6 pad 2, ReLU,
         maxpool, conv 5x5 6->16, ReLU, maxpool, dense 400-120-84-10 with ReLU; maxpool
         2x2 stride 2, or 3x3 stride 2 pad 1 with --overlap-pool (model.overlap_pool)
  net    a config of model.kind net (configs/resnet.yaml by default): its layer list in
         PyTorch (scripts/torch_net.py), batch normalisation PyTorch's default -- the whole
         batch's statistics, not detrain's per canonical shard -- trained by SGD
  gpt    configs/gpt.yaml by default: nets/gpt.c's transformer (scripts/torch_gpt.py, the
         model scripts/gpt_vs_torch.py replays) with the config's context, width, layers,
         heads, tied head and dropout, trained by AdamW (the config's betas, eps, weight
         decay, lr) with clipping at the config's norm, on windows of context + 1 bytes at
         random offsets of the config's corpus (Debian's fortunes by default; random bytes
         when absent)

Modes (--modes; default mlp: default,tf32,deterministic; lenet: default,benchmark,
deterministic; gpt: default,tf32,deterministic,sdpa):

  default        PyTorch's defaults (TF32 off for matrix products, as PyTorch ships;
                 cuDNN picks convolution algorithms by heuristics, benchmark off)
  fp32           default, with cuDNN's TF32 off too (cudnn.allow_tf32 = False): FP32
                 everywhere, like for like with detrain's math: fast (the MLP's and the GPT's
                 default is already that: they have no convolution)
  tf32           default, plus TF32 tensor-core matrix products (what detrain's math: tf32
                 allows on the GPU)
  benchmark      default, plus cudnn.benchmark = True: cuDNN times the convolution
                 algorithms on the first steps and keeps the fastest (autotuning, what
                 detrain's conv_algo: autotune does)
  deterministic  torch.use_deterministic_algorithms(True), cudnn.deterministic = True,
                 cudnn.benchmark = False, CUBLAS_WORKSPACE_CONFIG=:4096:8 set before CUDA starts
  sdpa           gpt only: default, with attention by F.scaled_dot_product_attention
                 (PyTorch >= 2.0: its fused kernels on a GPU -- FlashAttention takes only
                 fp16/bf16, so in this fp32 model the memory-efficient kernel or the math
                 fallback runs): the anchor a user would pick instead; skipped (noted)
                 where PyTorch lacks it
  compile        gpt only: default, the model wrapped in torch.compile (PyTorch >= 2.0;
                 the warm-up steps include the compilation); skipped (noted) where it is
                 missing or cannot compile here

Data: Fashion-MNIST when found (dataset.path, $DETRAIN_DATA, /usr/share/datasets/
fashion-mnist), else uniform random images and labels; either way held on the device, so
a step is batch gather + forward + backward + update. Each step is timed from a
torch.cuda.synchronize() to the next. Output: a CSV (--csv, appended; header when new; the
MLP's and LeNet's headers differ, so each model needs its own file) and one line per mode. --device cpu runs the same on the CPU (for smoke tests; no GPU needed).
Exit 0 on success, 2 on bad arguments or a missing device, 77 when PyTorch is missing.
"""
import argparse
import gzip
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("default", "fp32", "tf32", "benchmark", "deterministic", "sdpa", "compile")
DEFAULT_MODES = {"mlp": ("default", "tf32", "deterministic"),
                 "lenet": ("default", "benchmark", "deterministic"),
                 "gpt": ("default", "tf32", "deterministic", "sdpa"),
                 "net": ("default", "benchmark", "deterministic")}
DEFAULT_CONFIG = {"mlp": "quickstart.yaml", "lenet": "lenet.yaml", "gpt": "gpt.yaml",
                  "net": "resnet.yaml"}
EXIT_SKIP = 77
CSV_HEADER = ("mode,steps,median_ms,p10_ms,p90_ms,device,torch,tf32_matmul,tf32_cudnn,"
              "deterministic,batch,hidden,data,threads,final_loss,weights_sha256")
GPT_CSV_HEADER = ("mode,steps,median_ms,p10_ms,p90_ms,device,torch,tf32_matmul,deterministic,"
                  "sdpa,batch,model,data,threads,final_loss,weights_sha256")
LENET_CSV_HEADER = ("mode,steps,median_ms,p10_ms,p90_ms,device,torch,tf32_matmul,tf32_cudnn,"
                    "cudnn_benchmark,deterministic,batch,model,pool,data,threads,final_loss,"
                    "weights_sha256")


def load_config(path):
    """The config's model and optimizer settings (defaults as in detrain's config table)."""
    cfg = {"kind": "mlp", "hidden": [256, 128], "overlap_pool": False, "batch": 64, "lr": 0.05,
           "momentum": 0.9, "weight_decay": 0.0, "seed": 0, "threads": 0, "data_path": "",
           "gpt": None, "network": None}
    if not path:
        return cfg
    try:
        import yaml
    except ImportError:
        sys.exit("bench_torch.py: PyYAML is needed to read %s (or pass --no-config and "
                 "--hidden/--batch/--lr/--momentum/--weight-decay)" % path)
    try:
        with open(path) as f:
            doc = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as e:
        print("bench_torch.py: %s: %s" % (path, e), file=sys.stderr)
        sys.exit(2)
    model = doc.get("model") or {}
    cfg["kind"] = model.get("kind", "mlp")
    if cfg["kind"] == "bnn_mlp":  # its widths, as a plain MLP (no Bayesian sampling)
        print("bench_torch.py: %s: bnn_mlp mirrored as a plain MLP of the same widths" % path,
              file=sys.stderr)
        cfg["kind"] = "mlp"
    if cfg["kind"] not in DEFAULT_MODES:
        print("bench_torch.py: %s: model.kind is %r; only mlp, lenet, net and gpt are mirrored" % (
            path, cfg["kind"]), file=sys.stderr)
        sys.exit(2)
    train = doc.get("train") or {}
    opt = train.get("optimizer") or {}
    if cfg["kind"] == "gpt":  # detrain's defaults (harness/setup/config.c) where absent
        cfg["gpt"] = {"context": int(model.get("context", 64)),
                      "d_model": int(model.get("d_model", 64)),
                      "layers": int(model.get("layers", 2)), "heads": int(model.get("heads", 4)),
                      "tie": bool(model.get("tie_embeddings", True)),
                      "dropout": float(model.get("dropout", 0.0)),
                      "optimizer": opt.get("kind", "sgd"),
                      "beta1": float(opt.get("beta1", 0.9)), "beta2": float(opt.get("beta2", 0.999)),
                      "eps": float(opt.get("eps", 1e-8)),
                      "clip_norm": float(opt.get("clip_norm", 0.0))}
    if cfg["kind"] == "net":
        cfg["network"] = model.get("network")
    cfg["hidden"] = list(model.get("hidden", cfg["hidden"]))
    cfg["overlap_pool"] = bool(model.get("overlap_pool", False))
    cfg["batch"] = int(train.get("batch", cfg["batch"]))
    cfg["lr"] = float(opt.get("lr", cfg["lr"]))
    cfg["momentum"] = float(opt.get("momentum", cfg["momentum"]))
    cfg["weight_decay"] = float(opt.get("weight_decay", cfg["weight_decay"]))
    cfg["seed"] = int(train.get("seed", cfg["seed"]))
    cfg["threads"] = int((doc.get("backend") or {}).get("threads", 0))
    cfg["data_path"] = str((doc.get("dataset") or {}).get("path", "") or "")
    return cfg


def find_fashion_mnist(config_path):
    """The folder detrain would read (harness/setup/data.c's order), or None."""
    for d in (config_path, os.environ.get("DETRAIN_DATA", ""), "/usr/share/datasets/fashion-mnist"):
        if d and any(os.path.exists(os.path.join(d, "train-images-idx3-ubyte" + z)) for z in ("", ".gz")):
            return d
    return None


def read_idx(folder, name):
    """An IDX file of unsigned bytes (plain or .gz) as a uint8 tensor of its shape."""
    import torch
    for z in ("", ".gz"):
        p = os.path.join(folder, name + z)
        if os.path.exists(p):
            with (gzip.open(p, "rb") if z else open(p, "rb")) as f:
                raw = bytearray(f.read())
            if raw[:3] != b"\0\0\x08":
                sys.exit("bench_torch.py: %s: not an IDX file of unsigned bytes" % p)
            ndim = raw[3]
            dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
            return torch.frombuffer(raw, dtype=torch.uint8, offset=4 + 4 * ndim).reshape(dims)
    raise FileNotFoundError(os.path.join(folder, name))


def csv_field(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "%.9g" % v
    v = str(v)
    return '"%s"' % v.replace('"', '""') if any(c in v for c in ',"') else v


def worker(args):
    """One mode in this process: set it up before CUDA starts, train, print one JSON line."""
    mode = args.worker
    if mode == "deterministic":
        # cuBLAS reads this when its handle is made: it must be set before CUDA starts.
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    import torch
    import torch.nn.functional as F

    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench_torch.py: --device cuda but torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    dev = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    if mode == "tf32":
        torch.backends.cudnn.allow_tf32 = True
    if mode == "fp32":
        torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = mode == "benchmark"
    if mode == "deterministic":
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    threads = args.threads
    if args.device == "cpu" and threads > 0:
        torch.set_num_threads(threads)
    torch.manual_seed(args.seed)
    if args.model == "gpt":
        return worker_gpt(args, torch, F, dev, mode)

    folder = None if args.data == "random" else (args.data if args.data != "auto" else find_fashion_mnist(args.data_path))
    if folder:
        x_all = read_idx(folder, "train-images-idx3-ubyte").reshape(-1, 784)
        x_all = x_all.to(dev, torch.float32) / 255.0  # pixels in [0, 1], as detrain
        y_all = read_idx(folder, "train-labels-idx1-ubyte").to(dev, torch.int64)
        data = "fashion-mnist"
    else:
        g = torch.Generator(device="cpu").manual_seed(args.seed)
        x_all = torch.rand(60000, 784, generator=g).to(dev)
        y_all = torch.randint(0, 10, (60000,), generator=g).to(dev)
        data = "random"
    n = x_all.shape[0]

    if args.model == "lenet":
        x_all = x_all.reshape(-1, 1, 28, 28)  # NCHW, PyTorch's layout (detrain: NHWC)
        model = lenet(torch, args.overlap_pool).to(dev)
    elif args.model == "net":
        x_all = x_all.reshape(-1, 1, 28, 28)
        model = net_module(json.loads(args.net_json), args.seed, dev)
    else:
        model = mlp(torch, args.hidden).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          weight_decay=args.weight_decay)
    perm = torch.randperm(n, device=dev)
    B = args.batch

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    times = []
    loss = None
    for s in range(args.warmup + args.steps):
        lo = (s * B) % (n - B + 1)
        idx = perm[lo:lo + B]
        sync()
        t0 = time.perf_counter()
        x = x_all.index_select(0, idx)
        y = y_all.index_select(0, idx)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sync()
        if s >= args.warmup:
            times.append((time.perf_counter() - t0) * 1e3)

    print(json.dumps(dict(result_fields(torch, dev, mode, times, model, loss), **{
        "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "batch": B, "hidden": "-".join(str(w) for w in args.hidden), "model": args.model,
        "pool": "-" if args.model == "net" else "3x3s2p1" if args.overlap_pool else "2x2s2",
        "data": data})))
    return 0


def result_fields(torch, dev, mode, times, model, loss):
    """Every model's fields of a mode's result: the step-time quantiles, the device and
    settings, the final loss and a digest of the final weights (equal digests = equal
    bits, e.g. between modes that should agree)."""
    times = sorted(times)
    q = statistics.quantiles(times, n=10, method="inclusive") if len(times) >= 2 else times * 9
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(bytes(p.detach().to("cpu").contiguous().view(torch.uint8).flatten().tolist()))
    return {"mode": mode, "steps": len(times), "median_ms": statistics.median(times),
            "p10_ms": q[0], "p90_ms": q[-1],
            "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
            "torch": torch.__version__,
            "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
            "deterministic": bool(torch.are_deterministic_algorithms_enabled()),
            "threads": torch.get_num_threads(), "final_loss": float(loss.item()),
            "weights_sha256": h.hexdigest()}


def gpt_defaults():
    """detrain's defaults (harness/setup/config.c: a gpt trained by SGD, as every model is
    without train.optimizer.kind), for --model gpt without a config."""
    return {"context": 64, "d_model": 64, "layers": 2, "heads": 4, "tie": True, "dropout": 0.0,
            "optimizer": "sgd", "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "clip_norm": 0.0}


def worker_gpt(args, torch, F, dev, mode):
    """The GPT in one mode: windows of context + 1 bytes at drawn offsets, forward,
    cross-entropy over every position, backward, clipping, the update."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_gpt
    g = json.loads(args.gpt_json) if args.gpt_json else gpt_defaults()
    if mode == "sdpa" and not torch_gpt.have_sdpa():
        print("bench_torch.py: mode sdpa: PyTorch %s has no scaled_dot_product_attention "
              "(2.0 or later); skipped" % torch.__version__, file=sys.stderr)
        return EXIT_SKIP
    T, D, H, L, tie = g["context"], g["d_model"], g["heads"], g["layers"], g["tie"]
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    net = torch_gpt.GPT(torch_gpt.random_weights(T, D, L, tie, gen), T, D, H, L, tie,
                        sdpa=mode == "sdpa", dropout=g["dropout"]).to(dev)
    net.train()
    if mode == "compile":
        if not hasattr(torch, "compile"):
            print("bench_torch.py: mode compile: PyTorch %s has no torch.compile (2.0 or later); "
                  "skipped" % torch.__version__, file=sys.stderr)
            return EXIT_SKIP
        net = torch.compile(net)
    # --data FOLDER|FILE names the corpus; auto: the config's dataset.path, else fortunes
    explicit = args.data not in ("auto", "random")
    corpus = args.data if explicit else (args.data_path or "/usr/share/games/fortunes")
    if explicit and not os.path.exists(corpus):
        print("bench_torch.py: --data %s: no such file or folder" % corpus, file=sys.stderr)
        return 2
    if args.data != "random" and os.path.exists(corpus):
        raw = torch_gpt.read_corpus(corpus)
        data = "text"
    else:
        raw = bytes(torch.randint(0, 256, (1 << 21,), generator=gen, dtype=torch.uint8).tolist())
        data = "random"
    if len(raw) < T + 2:
        print("bench_torch.py: %s: %d bytes, fewer than context + 2" % (corpus, len(raw)),
              file=sys.stderr)
        return 2
    text = torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(dev)
    B = args.batch
    total = args.warmup + args.steps
    offsets = torch.randint(0, len(raw) - T - 1, (total, B), generator=gen).to(dev)
    span = torch.arange(T + 1, device=dev)
    if g["optimizer"] == "adamw":
        opt = torch.optim.AdamW(net.parameters(), lr=args.lr, betas=(g["beta1"], g["beta2"]),
                                eps=g["eps"], weight_decay=args.weight_decay)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=args.momentum,
                              weight_decay=args.weight_decay)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    times, loss = [], None
    for s in range(total):
        sync()
        t0 = time.perf_counter()
        win = text[offsets[s][:, None] + span].long()
        if mode == "compile" and s == 0:
            try:  # the compilation happens here; a machine that cannot compile skips the mode
                logits = net(win[:, :T])
            except Exception as e:  # noqa: BLE001 (torch raises many kinds)
                print("bench_torch.py: mode compile: torch.compile failed here (%s: %s); skipped"
                      % (type(e).__name__, str(e).splitlines()[0][:200] if str(e) else ""),
                      file=sys.stderr)
                return EXIT_SKIP
        else:
            logits = net(win[:, :T])
        loss = F.cross_entropy(logits.reshape(-1, torch_gpt.VOCAB), win[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if g["clip_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(net.parameters(), g["clip_norm"])
        opt.step()
        sync()
        if s >= args.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps(dict(result_fields(torch, dev, mode, times, net, loss), **{
        "sdpa": mode == "sdpa", "batch": B,
        "model": "gpt L%d d%d h%d T%d %s%s" % (L, D, H, T, "tied" if tie else "untied",
                                              " dropout %g" % g["dropout"] if g["dropout"] else ""),
        "data": data})))
    return 0


def net_module(network, seed, dev):
    """A model.kind: net layer list (scripts/torch_net.py) as a callable with parameters():
    batch normalisation over the whole batch in training, as PyTorch's BatchNorm2d."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_net import Net, init_weights
    net = Net(network, {k: v.to(dev) for k, v in init_weights(network, seed=seed).items()})

    class Module:
        def __call__(self, x):
            return net.forward(x, True, [x.shape[0]])

        def parameters(self):
            return net.parameters()
    return Module()


def mlp(torch, hidden):
    """784 -> hidden... -> 10 with ReLU between the dense layers."""
    widths = [784] + hidden + [10]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def lenet(torch, overlap_pool):
    """nets/lenet.c's network: both pools give 14x14 and 5x5, so dense0 sees 400 features
    either way (here in (c, h, w) order, detrain's NHWC flatten is (h, w, c): the same
    work)."""
    nn = torch.nn

    def pool():
        return nn.MaxPool2d(3, stride=2, padding=1) if overlap_pool else nn.MaxPool2d(2, stride=2)
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), pool(),
        nn.Conv2d(6, 16, 5), nn.ReLU(), pool(),
        nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config",
                    help="detrain config whose model to mirror (default: the repo's "
                         "configs/quickstart.yaml, or configs/lenet.yaml with --model lenet)")
    ap.add_argument("--no-config", action="store_true", help="read no config; use the options only")
    ap.add_argument("--model", choices=tuple(DEFAULT_MODES),
                    help="mlp or lenet (default: the config's model.kind; mlp without a config)")
    ap.add_argument("--overlap-pool", action="store_true", default=None,
                    help="lenet: 3x3 stride-2 pad-1 max pooling (default: the config's "
                         "model.overlap_pool, else 2x2 stride 2)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--modes",
                    help="comma-separated subset of %s (default: %s for mlp, %s for lenet)" % (
                        ", ".join(MODES), ",".join(DEFAULT_MODES["mlp"]),
                        ",".join(DEFAULT_MODES["lenet"])))
    ap.add_argument("--steps", type=int, default=500, help="timed steps per mode (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=50, help="untimed steps first (default %(default)s)")
    ap.add_argument("--hidden", help="hidden widths, e.g. 256,128 (overrides the config)")
    ap.add_argument("--batch", type=int, help="batch size (overrides the config)")
    ap.add_argument("--lr", type=float)
    ap.add_argument("--momentum", type=float)
    ap.add_argument("--weight-decay", type=float)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--threads", type=int, help="CPU threads for --device cpu (default: the config's)")
    ap.add_argument("--data", default="auto",
                    help="auto (Fashion-MNIST if found, else random), random, or a folder")
    ap.add_argument("--csv", help="append the rows to this CSV file")
    ap.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--data-path", default="", help=argparse.SUPPRESS)
    ap.add_argument("--gpt-json", default="", help=argparse.SUPPRESS)
    ap.add_argument("--net-json", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.config is None and not args.no_config:
        args.config = os.path.join(REPO, "configs", DEFAULT_CONFIG[args.model or "mlp"])
    cfg = load_config(None if args.no_config else args.config)
    if args.model is None:
        args.model = cfg["kind"]
    elif not args.no_config and cfg["kind"] != args.model:
        ap.error("--model %s, but %s trains model.kind %s" % (args.model, args.config, cfg["kind"]))
    if args.overlap_pool is None:
        args.overlap_pool = cfg["overlap_pool"]
    if args.overlap_pool and args.model != "lenet":
        ap.error("--overlap-pool: only for --model lenet")
    if args.hidden is not None:
        try:
            args.hidden = [int(w) for w in args.hidden.split(",") if w.strip()]
        except ValueError:
            ap.error("--hidden: comma-separated integers, got %r" % args.hidden)
    for key in ("hidden", "batch", "lr", "momentum", "weight_decay", "seed", "threads"):
        if getattr(args, key) is None:
            setattr(args, key, cfg[key])
    if not args.data_path:
        args.data_path = cfg["data_path"]
    if args.steps < 1 or args.warmup < 0 or args.batch < 1 or any(w < 1 for w in args.hidden):
        ap.error("--steps >= 1, --warmup >= 0, --batch >= 1 and positive widths, please")

    if args.worker:
        return worker(args)

    modes = [m.strip() for m in (args.modes or ",".join(DEFAULT_MODES[args.model])).split(",")
             if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        ap.error("--modes: unknown %s; choose from %s" % (", ".join(bad) or "(none)", ", ".join(MODES)))
    for gpt_only in ("sdpa", "compile"):
        if gpt_only in modes and args.model != "gpt":
            ap.error("--modes %s: for --model gpt only" % gpt_only)
    import importlib.util
    if importlib.util.find_spec("torch") is None:  # without importing it (seconds) here
        print("bench_torch.py: PyTorch is not installed (no module torch); skipped", file=sys.stderr)
        return 77

    base = [sys.executable, os.path.abspath(__file__), "--no-config", "--model", args.model,
            "--device", args.device,
            "--steps", str(args.steps), "--warmup", str(args.warmup),
            "--hidden", ",".join(str(w) for w in args.hidden), "--batch", str(args.batch),
            "--lr", repr(args.lr), "--momentum", repr(args.momentum),
            "--weight-decay", repr(args.weight_decay), "--seed", str(args.seed),
            "--threads", str(args.threads), "--data", args.data, "--data-path", args.data_path]
    if args.overlap_pool:
        base.append("--overlap-pool")
    if args.model == "gpt":
        base += ["--gpt-json", json.dumps(cfg["gpt"] or gpt_defaults())]
    if args.model == "net":
        if not cfg["network"]:
            ap.error("--model net: the config has no model.network (pass --config)")
        base += ["--net-json", json.dumps(cfg["network"])]
    header = {"lenet": LENET_CSV_HEADER, "gpt": GPT_CSV_HEADER, "net": LENET_CSV_HEADER}.get(
        args.model, CSV_HEADER)
    if args.csv and os.path.exists(args.csv) and os.path.getsize(args.csv) > 0:
        with open(args.csv) as f:  # refuse before training, not after
            first = f.readline().rstrip("\n")
        if first != header:
            print("bench_torch.py: %s: its header is not the %s header (%s...); give each model "
                  "its own --csv file" % (args.csv, args.model, first[:60]), file=sys.stderr)
            return 2
    rows = []
    for mode in modes:
        env = dict(os.environ)
        env.pop("CUBLAS_WORKSPACE_CONFIG", None)  # only the deterministic mode sets it
        p = subprocess.run(base + ["--worker", mode], env=env, stdout=subprocess.PIPE, text=True)
        if p.returncode == EXIT_SKIP:  # a mode this PyTorch lacks (said on stderr)
            continue
        lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
        if p.returncode != 0 or not lines:
            print("bench_torch.py: mode %s failed (exit %d)" % (mode, p.returncode), file=sys.stderr)
            return p.returncode or 1
        r = json.loads(lines[-1])
        rows.append(r)
        onoff = {k: "on" if r.get(k) else "off" for k in ("tf32_matmul", "tf32_cudnn",
                                                           "cudnn_benchmark", "deterministic")}
        # "torch VERSION MODE: DEVICE, MODEL, batch B, DATA data: median ... ms/step (...)"
        what = {"gpt": r.get("model"), "lenet": "LeNet 6-16-120-84-10, pool %s" % r.get("pool"),
                "mlp": "MLP 784-%s-10" % r.get("hidden"),
                "net": "net of %s (batch norm over the batch)" % os.path.basename(
                    args.config or "the config")}[args.model]
        settings = {"gpt": ("TF32 matmul %s, deterministic %s, sdpa %s" % (
                            onoff["tf32_matmul"], onoff["deterministic"],
                            "on" if r.get("sdpa") else "off")),
                    "net": ("cuDNN benchmark %s, TF32 matmul %s, cuDNN TF32 %s, deterministic "
                            "%s" % (onoff["cudnn_benchmark"], onoff["tf32_matmul"],
                                    onoff["tf32_cudnn"], onoff["deterministic"])),
                    "lenet": ("cuDNN benchmark %s, TF32 matmul %s, cuDNN TF32 %s, deterministic "
                              "%s" % (onoff["cudnn_benchmark"], onoff["tf32_matmul"],
                                      onoff["tf32_cudnn"], onoff["deterministic"])),
                    "mlp": ("TF32 matmul %s, cuDNN TF32 %s, deterministic %s" % (
                            onoff["tf32_matmul"], onoff["tf32_cudnn"], onoff["deterministic"]))}
        print("torch %s %s: %s, %s, batch %d, %s data: median %.3f ms/step (p10 %.3f, p90 %.3f; "
              "%d steps after %d warm-up), %s" % (
                  r["torch"], r["mode"], r["device"], what, r["batch"], r["data"], r["median_ms"],
                  r["p10_ms"], r["p90_ms"], r["steps"], args.warmup, settings[args.model]))
        sys.stdout.flush()
    if args.csv:
        new = not os.path.exists(args.csv) or os.path.getsize(args.csv) == 0
        with open(args.csv, "a") as f:
            if new:
                f.write(header + "\n")
            for r in rows:
                f.write(",".join(csv_field(r[k]) for k in header.split(",")) + "\n")
    by_mode = {r["mode"]: r for r in rows}
    if "default" in by_mode and "deterministic" in by_mode:
        print("torch deterministic vs default: %.2fx median step time" % (
            by_mode["deterministic"]["median_ms"] / by_mode["default"]["median_ms"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
