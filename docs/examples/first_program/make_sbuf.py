"""The SBUF image of docs/first_program.md: A[K, M] and B[K, N] in bf16, row k in SBUF partition k.

    python make_sbuf.py                                        # K = M = 8, N = 16 -> sbuf.npz (gemm.s)
    python make_sbuf.py --k 128 --m 128 --n 512 -o full.npz    # the full-size form (gemm_128.s)

The .npz holds `sbuf` ([128, bytes] uint8: what `tensore run` / `tensore cosim --sbuf` load) and
the operands as float32 (`a`, `b`, exact bf16 values) for the comparison with numpy."""
from __future__ import annotations

import argparse
from pathlib import Path

import ml_dtypes
import numpy as np

A_OFFSET = 0x000        # byte offset of A inside each partition (gemm.s: ldweights src)
B_OFFSET = 0x400        # byte offset of B inside each partition (gemm.s: matmul src)
PARTITIONS = 128


def sbuf_image(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[128, bytes] uint8: partition k holds A[k, :] at A_OFFSET and B[k, :] at B_OFFSET, each element
    2 bytes little-endian (the bf16 code), element j at offset + 2*j."""
    k, m = a.shape
    n = b.shape[1]
    if 2 * m > B_OFFSET - A_OFFSET:
        raise ValueError(f"A's {m} columns do not fit below B_OFFSET {B_OFFSET:#x}")
    sbuf = np.zeros((PARTITIONS, B_OFFSET + 2 * n), np.uint8)
    sbuf[:k, A_OFFSET:A_OFFSET + 2 * m] = a.astype(ml_dtypes.bfloat16).view(np.uint8)
    sbuf[:k, B_OFFSET:B_OFFSET + 2 * n] = b.astype(ml_dtypes.bfloat16).view(np.uint8)
    return sbuf


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=8, help="contraction (array rows, SBUF partitions), <= 128")
    ap.add_argument("--m", type=int, default=8, help="columns of A = rows of C (array columns)")
    ap.add_argument("--n", type=int, default=16, help="columns of B = moving vectors (<= 512 per fp32 bank)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--output", default="sbuf.npz")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    a = rng.standard_normal((args.k, args.m)).astype(ml_dtypes.bfloat16)     # round to bf16 once
    b = rng.standard_normal((args.k, args.n)).astype(ml_dtypes.bfloat16)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.output, sbuf=sbuf_image(a, b), a=a.astype(np.float32), b=b.astype(np.float32))
    print(f"wrote {args.output}: A {args.k}x{args.m} at {A_OFFSET:#x}, B {args.k}x{args.n} at {B_OFFSET:#x}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
