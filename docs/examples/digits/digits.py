"""Handwritten digits through the engine: scikit-learn's digits data set (8 x 8 images, 10 classes),
a 2-layer classifier trained here in numpy, and its inference GEMMs run on tensore.

    hidden = relu(X @ W1 + b1)        X [images, 64], W1 [64, 32]
    logits = hidden @ W2 + b2         W2 [32, 10]

Each matmul is a `tensore.kernels.gemm` program: the operands rounded to bf16 (RNE, as `tensore gemm
--quantise` rounds them), fp32 PSUM, on the golden engine; --rtl runs the same programs on the engine
RTL in Verilator too, every cycle checked against the golden engine, and compares its predictions'
bits with the golden ones.  The bias adds and the ReLU stay in numpy float32 (the engine only
multiplies).  Needs the `examples` extra (scikit-learn): pip install -e '.[examples]'."""
import argparse
import sys
from pathlib import Path

import numpy as np

SEED = 0
PACK = None         # elements per PE of the RTL build: None, what the programs need (tests share a build of 8)


def load(seed=SEED):
    """(X_train, X_test, y_train, y_test): pixels scaled to [0, 1] (k / 16, exact in bf16), 25% test."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    X, y = load_digits(return_X_y=True)
    return train_test_split((X / 16).astype(np.float32), y, test_size=0.25, random_state=seed, stratify=y)


def train(X, y, hidden=32, steps=300, lr=0.01, seed=SEED):
    """A 64-32-10 MLP: softmax cross-entropy, full-batch Adam in float64; float32 parameters (one BLAS
    thread: as fast for matrices this small, and the same sums on any machine)."""
    from threadpoolctl import threadpool_limits
    with threadpool_limits(1):
        return _train(X, y, hidden, steps, lr, seed)


def _train(X, y, hidden, steps, lr, seed):
    rng, X = np.random.default_rng(seed), X.astype(np.float64)
    p = [rng.standard_normal((X.shape[1], hidden)) * np.sqrt(2 / X.shape[1]), np.zeros(hidden),
         rng.standard_normal((hidden, 10)) * np.sqrt(2 / hidden), np.zeros(10)]
    m, v = [np.zeros_like(a) for a in p], [np.zeros_like(a) for a in p]
    onehot = np.eye(10)[y]
    for t in range(1, steps + 1):
        z = X @ p[0] + p[1]
        h = np.maximum(z, 0)
        logits = h @ p[2] + p[3]
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        d = (e / e.sum(axis=1, keepdims=True) - onehot) / len(X)       # d loss / d logits
        dh = (d @ p[2].T) * (z > 0)
        grads = [X.T @ dh, dh.sum(0), h.T @ d, d.sum(0)]
        for i, g in enumerate(grads):
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g * g
            p[i] -= lr * (m[i] / (1 - 0.9 ** t)) / (np.sqrt(v[i] / (1 - 0.999 ** t)) + 1e-8)
    return [a.astype(np.float32) for a in p]


def forward(X, params, matmul):
    """(hidden pre-activation, logits), each matmul by `matmul(A, B)`, the rest in float32."""
    W1, b1, W2, b2 = params
    z = matmul(X, W1) + b1
    return z, matmul(np.maximum(z, 0), W2) + b2


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=450, help="test images to classify (default: all 450)")
    ap.add_argument("--gen", default="mariana", help="chip generation (default: mariana)")
    ap.add_argument("--rows", type=int, default=128, help="array rows (default: 128)")
    ap.add_argument("--cols", type=int, help="array columns (default: --rows)")
    ap.add_argument("--rtl", action="store_true", help="also run both layers on the engine RTL (Verilator)")
    ap.add_argument("--plot", metavar="PNG", help="write the picture: logit error per layer, confusion")
    ap.add_argument("--save", metavar="DIR", help="write the layers' operands x, w1, h, w2 (.npy) for `tensore gemm`")
    args = ap.parse_args(argv)
    from tensore.kernels import gemm as G

    X_train, X_test, y_train, y_test = load()
    params = train(X_train, y_train)
    X, y = X_test[:args.images], y_test[:args.images]
    size = dict(gen=args.gen, rows=args.rows, cols=args.cols or args.rows)
    operands = []

    def golden(A, B):
        prog = G.gemm(A, B, dtype="bf16", **size)
        operands.extend((A, B))
        changed = [(G.values(codes, "bf16", args.gen) != x).sum() for codes, x in ((prog.a_codes, A), (prog.b_codes, B))]
        print(f"  gemm {prog.note}: bf16 operands changed {changed[0]} of {A.size} A values, "
              f"{changed[1]} of {B.size} B values")
        return G.run(prog, trace="aggregate")[0]

    print(f"digits: {len(X_train)} training images, {len(X)} test images of 8 x 8 pixels; "
          f"MLP 64-32-10 trained in numpy (seed {SEED})")
    print(f"tensore golden engine, {engine_name(size)}:")
    z_t, logits_t = forward(X, params, golden)
    z_n, logits_n = forward(X, params, lambda A, B: A @ B)           # numpy float32
    pred_t, pred_n = logits_t.argmax(1), logits_n.argmax(1)
    print(f"accuracy: tensore {(pred_t == y).mean():.2%}, numpy float32 {(pred_n == y).mean():.2%} "
          f"({len(y)} images)")
    print(f"agreement: same class on {(pred_t == pred_n).sum()}/{len(y)} images")
    print(f"max |tensore - numpy float32|: hidden {np.abs(z_t - z_n).max():.4f}, "
          f"logits {np.abs(logits_t - logits_n).max():.4f} (logits span {logits_n.min():.1f}..{logits_n.max():.1f})")
    if args.save:
        Path(args.save).mkdir(parents=True, exist_ok=True)
        for name, x in zip(("x", "w1", "h", "w2"), operands):
            np.save(Path(args.save) / f"{name}.npy", x)
        print(f"operands: {args.save}/x.npy, w1.npy (layer 1), h.npy, w2.npy (layer 2)")
    status = 0
    if args.rtl:
        status = rtl(X, params, size, logits_t)
    if args.plot:
        plot(args.plot, (z_t - z_n, logits_t - logits_n), pred_t, pred_n, size)
        print(f"picture: {args.plot}")
    return status


def engine_name(size) -> str:
    return f"{size['gen'].upper()} {size['rows']} x {size['cols']}"


def rtl(X, params, size, logits_golden) -> int:
    """Both layers on the engine RTL, the second from the RTL's own hidden layer; 1 if any bit differs."""
    from tensore.cli import cosim_opt
    from tensore.cosim import hdl
    from tensore.kernels import gemm as G
    from tensore.outputs import harness_write_rows

    def on_rtl(A, B):
        prog = G.gemm(A, B, dtype="bf16", **size)
        res = hdl.run(prog, pack=PACK, psum_partitions=max(16, prog.half), opt=cosim_opt("auto", prog.rows, prog.cols))
        if res.mismatch is not None:
            raise SystemExit(f"RTL differs from the golden engine: {res.mismatch}")
        lk = res.lockstep
        print(f"  gemm {prog.note}: {res.cycles:,} cycles, {res.checks:,} checks, lockstep vs golden engine: OK")
        return prog.read(lk.trace, rtl_writes=harness_write_rows(lk.rtl_writes))

    print(f"tensore engine RTL on Verilator, {engine_name(size)}:")
    logits = forward(X, params, on_rtl)[1]
    same = np.array_equal(logits.view(np.uint32), logits_golden.view(np.uint32))
    print(f"RTL logits bit-identical to the golden engine's: {'yes' if same else 'NO'} "
          f"({logits.size} values); same class on {(logits.argmax(1) == logits_golden.argmax(1)).sum()}/{len(logits)}")
    return 0 if same else 1


def plot(path, errors, pred_t, pred_n, size):
    """Left: |tensore - numpy float32| per layer; right: tensore's class against numpy's."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, cm_ax) = plt.subplots(1, 2, figsize=(9, 3.6))
    bins = np.logspace(-7, 0, 36)
    for err, name in zip(errors, ("hidden (X W1 + b1)", "logits (H W2 + b2)")):
        ax.hist(np.abs(err).ravel(), bins=bins, histtype="step", lw=1.5,
                label=f"{name}\n{(err == 0).sum()} of {err.size} exact (not drawn)")
    ax.set_xscale("log")
    ax.set(xlabel="|tensore - numpy float32|", ylabel="values",
           title=f"error per layer (bf16 operands, {engine_name(size)})")
    ax.legend(fontsize=7, loc="upper left")
    cm = np.zeros((10, 10), int)
    np.add.at(cm, (pred_n, pred_t), 1)
    cm_ax.imshow(np.log1p(cm), cmap="Blues")
    for i, j in zip(*np.nonzero(cm)):
        cm_ax.text(j, i, cm[i, j], ha="center", va="center", fontsize=7, color="white" if i == j else "red")
    cm_ax.set(xlabel="tensore class", ylabel="numpy float32 class", xticks=range(10), yticks=range(10),
              title=f"predictions: {(pred_t == pred_n).sum()}/{len(pred_t)} agree")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
