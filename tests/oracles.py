"""Independent reference arithmetic for the tests: exact Fractions and Berkeley SoftFloat.
(The exact rounding `rne_fp32` lives in cosim/oracle.py, the library's expectation oracle.)"""
from fractions import Fraction

import numpy as np
import softfloatpy as sf

from tensore.cosim.oracle import rne_fp32  # noqa: F401  (re-exported for the tests)


def fused_chain_oracle(w, a, scales=None, psum0=None):
    """Per column: psum = RNE(psum + exact sum of the row's products), rows in order (D-10/D-11).

    w [rows, pack, M], a [rows, pack, N] float64 values; scales (sw [rows, M], sa [rows, N]).
    Returns float32 [M, N] bit patterns as uint32 (NaN canonical)."""
    rows, pack, m = w.shape
    n = a.shape[2]
    out = np.zeros((m, n), np.uint32)
    for i in range(m):
        for j in range(n):
            p = 0.0 if psum0 is None else float(psum0[i, j])
            for r in range(rows):
                terms = [float(w[r, k, i]) * float(a[r, k, j]) for k in range(pack)]
                if scales is not None:
                    se = float(scales[0][r][i]) + float(scales[1][r][j])
                    terms = [t * (2.0 ** se) if se == se else float("nan") for t in terms]
                vals = [p] + terms
                if any(v != v for v in vals) or (float("inf") in vals and float("-inf") in vals):
                    p = float("nan")
                elif any(v in (float("inf"), float("-inf")) for v in vals):
                    p = next(v for v in vals if v in (float("inf"), float("-inf")))
                else:
                    exact = sum((Fraction(v) for v in vals), Fraction(0))
                    if exact == 0:
                        neg = all(np.signbit(v) for v in vals)
                        p = -0.0 if neg else 0.0
                    else:
                        p = rne_fp32(exact)
            out[i, j] = 0x7FC00000 if p != p else int(np.float32(p).view(np.uint32))
    return out


def f32(v) -> "sf.Float32":
    return sf.Float32.from_bytes(int(np.float32(v).view(np.uint32)).to_bytes(4, "big"))


def softfloat_chain(w, a):
    """psum = f32_mulAdd(w, a, psum) down each column (single-product rows, RNE)."""
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    k, m = w.shape
    n = a.shape[1]
    out = np.zeros((m, n), np.uint32)
    for i in range(m):
        for j in range(n):
            p = f32(0.0)
            for r in range(k):
                p = sf.f32_mul_add(f32(w[r, i]), f32(a[r, j]), p)
            out[i, j] = int.from_bytes(p.to_bytes(), "big")
    return out
