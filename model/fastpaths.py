"""Fast exact column chains behind model/array.py (D-T53, D-T75, D-T76).

Every chain here returns the bits of the PE chain of SPEC D-10 / D-11 (psum starts at +0, each row
adds its exact product or exact product sum with one round to nearest even), computed with BLAS on
whole [N, M] arrays, one call per row, or (fp32 modes, fp32_chain) with compiled fused multiply-adds.
The argument each one rests on is in its docstring; the precondition it needs is checked by the
caller (or here, returning None) on the operands.

BLAS model: a BLAS forms each element of an update from the correctly rounded products of its
operands and the old element by correctly rounded additions or fused multiply-adds, in an order
it chooses (no Strassen, no flush to zero).  When every product and every partial sum is exactly
representable, every such evaluation gives the same, exact, value.

Layout: psum^T [N, M] in Fortran order is psum [M, N] in C order, so the result is a view."""
from __future__ import annotations

import functools
import threading

import numpy as np
from scipy.linalg import blas as _blas

from tensore.model.fp import two_sum
from tensore.model.mac import fused_sum

TINY, HUGE = 2.0 ** -149, 2.0 ** 128         # fp32's smallest subnormal; its overflow bound
MID_MASK, MID = np.uint64((1 << 29) - 1), np.uint64(1 << 28)      # float64 bits of an fp32 tie


def abs_span(x: np.ndarray) -> tuple:
    """(max |x|, min non-zero |x|) as floats: max is NaN / Inf when x holds NaN / Inf, min is +Inf
    when x holds no non-zero value (NaN > 0 is false: NaNs are skipped)."""
    ax = np.abs(x)
    return float(ax.max(initial=0.0)), float(np.min(ax, where=ax > 0, initial=np.inf))


def lsb(x: np.ndarray) -> np.ndarray:
    """The weight of the lowest set significand bit of each finite float32 / float64 value (same
    type), +Inf for zeros.  float32 values whose low 16 bits are zero (formats of <= 8 significant
    bits) read a table of their high 16 bits."""
    x = np.asarray(x)
    if x.dtype == np.float32 and x.size > 4096:
        bits = x.view(np.uint32)
        if not (bits & np.uint32(0xFFFF)).any():
            return np.take(_lsb_table(), bits >> np.uint32(16))
    return _lsb_bits(x)


def _lsb_bits(x: np.ndarray) -> np.ndarray:
    """lsb by bit operations: zeros become +Inf first; clearing the lowest set bit of the pattern
    keeps the exponent unless the fraction field is zero (a power of two or Inf: nothing is
    cleared), so the difference of the two values is exact (Sterbenz)."""
    ftype, utype, width, fbits = ((np.float32, np.uint32, 32, 23) if x.dtype == np.float32 else
                                  (np.float64, np.uint64, 64, 52))
    b = x.astype(ftype).view(utype)
    b &= utype((1 << (width - 1)) - 1)
    t = b - utype(1)
    z = t >> utype(width - 1)                        # 1 for zeros
    np.multiply(z, np.array(np.inf, ftype).view(utype), out=z)
    b |= z
    np.subtract(b, utype(1), out=t)
    t &= b                                           # the pattern with its lowest set bit cleared
    np.bitwise_and(b, utype((1 << fbits) - 1), out=z)
    z += utype((1 << fbits) - 1)
    z >>= utype(fbits)                               # 1 where the fraction field is non-zero
    np.negative(z, out=z)
    t &= z
    return np.subtract(b.view(ftype), t.view(ftype), out=b.view(ftype))


@functools.cache
def _lsb_table() -> np.ndarray:
    """lsb of each float32 whose low 16 bits are zero, indexed by its high 16 bits (0 for the
    NaN / Inf patterns, which callers never pass)."""
    hi = (np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)).view(np.float32)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(hi), _lsb_bits(np.where(np.isfinite(hi), hi, np.float32(0))), np.float32(0))


def _steps_buffer(rows: int, m: int, n: int, partials: bool):
    return np.empty((rows, m, n), np.float32) if partials else None


def rank1_chain(w32: np.ndarray, a32: np.ndarray, partials: bool):
    """Single-product rows (D-10) with every product exact in float32: finite operands, products of
    <= 24 significant bits, every product a multiple of 2^-149 below 2^128 (caller's precondition).
    One BLAS rank-1 update per row: the product is exact, so mul + add and FMA both give
    RNE(psum + product).  A BLAS may skip zero products; psum starts at +0 and, every product being
    a multiple of 2^-149, an exact zero sum is +0, so psum is never -0 and a skipped +-0 changes
    nothing.  Returns (psum [M, N] float32, steps [rows, M, N] or None)."""
    k, m, n = w32.shape[0], w32.shape[1], a32.shape[1]
    p = np.zeros((n, m), np.float32, order="F")
    steps = _steps_buffer(k, m, n, partials)
    for r in range(k):
        p = _blas.sger(1.0, a32[r], w32[r], a=p, overwrite_a=1)
        if partials:
            steps[r] = p.T
    return p.T, steps


def sparse_chain(w32: np.ndarray, a32: np.ndarray, tags: np.ndarray, partials: bool):
    """MatmulSparse (seed 000 section 9) with products exact in float32 (rank1_chain's precondition).
    Row r is one update psum += W_r^T A_r with K = F, where W_r[f, c] = w[r, c] if tag[r, c] == f
    else 0: each element sums psum, its one product and F - 1 exact zeros (finite moving data), so in
    any order and with or without FMAs the one inexact operation is RNE(psum + product) (BLAS model)."""
    k, f, n = a32.shape
    m = w32.shape[1]
    wsel = np.zeros((k, f, m), np.float32)
    np.put_along_axis(wsel, tags[:, None, :].astype(np.intp), w32[:, None, :], axis=1)
    p = np.zeros((n, m), np.float32, order="F")
    steps = _steps_buffer(k, m, n, partials)
    for r in range(k):
        p = _blas.sgemm(1.0, a32[r].T, wsel[r].T, beta=1.0, c=p, trans_b=1, overwrite_c=1)
        if partials:
            steps[r] = p.T
    return p.T, steps


def block_scaled(x: np.ndarray, exponents) -> np.ndarray:
    """x [rows, pack, M] with each row's values times 2^e, e [rows, M] the E8M0 exponents of their MX
    blocks (D-21): float64, exact (powers of two, far inside float64's range), NaN for a NaN scale.
    The one place the MX scales are applied: folded into both operands, each product carries the
    scales of both its blocks."""
    return x * np.exp2(exponents)[:, None, :]


def multi_chain(w: np.ndarray, a: np.ndarray, scales, partials: bool):
    """Multi-term rows (D-11: FP8 double row, MX with scales, D-21) as float32 row sums, or None.

    w [rows, pack, M] and a [rows, pack, N] values; scales None or (sw [rows, M], sa [rows, N]) E8M0
    exponents.  The scales are powers of two: folded into the operands they are exact when the
    folded values stay in fp32's range (checked, else None).  For cell (i, j) of row r every term
    w_k a_k is a multiple of Q = min_k lsb(w_k) * min_k lsb(a_k) and every partial sum is at most
    pack * max|w_k| * max|a_k|; when that bound is below 2^24 Q (X_i Y_j < 2^24 / pack with
    X = max|w_k| / min lsb(w_k), scale-free) and Q >= 2^-149, every partial sum is an fp32 value, so
    a float32 GEMM of the row (any order, BLAS model) gives the exact row sum T, and the float32 add
    psum + T is the one RNE rounding.  Cells where some row fails the bound are recomputed exactly
    afterwards by cell_chain (D-T75)."""
    rows, pack, m = w.shape
    n = a.shape[2]
    w32, a32 = np.ascontiguousarray(w, np.float32), np.ascontiguousarray(a, np.float32)
    sw = sa = None
    if scales is not None:
        sw, sa = np.asarray(scales[0], np.float64), np.asarray(scales[1], np.float64)
    (mw, lw), (ma, la) = _pack_stats(w32), _pack_stats(a32)
    if mw is None or ma is None or not _folded_in_range(mw, lw, sw, ma, la, sa, pack):
        return None
    with np.errstate(over="ignore"):
        np.divide(mw, lw, out=mw)                   # X = max|w_k| / min lsb(w_k); Inf: dirty anyway
        np.divide(ma, la, out=ma)
        ci, cj = _dirty_cells(w32, a32, mw, ma, 2.0 ** 24 / pack)
    if scales is not None:
        w32, a32 = block_scaled(w, sw).astype(np.float32), block_scaled(a, sa).astype(np.float32)
    p = np.zeros((n, m), np.float32, order="F")
    t = _scratch("t", (n, m), np.float32)
    steps = _steps_buffer(rows, m, n, partials)
    with np.errstate(over="ignore"):                # psum overflow: +-Inf, as RNE gives
        for r in range(rows):
            t = _blas.sgemm(1.0, a32[r].T, w32[r].T, c=t, trans_b=1, overwrite_c=1)
            np.add(p, t, out=p)
            if partials:
                steps[r] = p.T
    if ci.size:
        fix, fix_steps = cell_chain(w32[:, :, ci], a32[:, :, cj], partials)
        p[cj, ci] = fix
        if partials:
            steps[:, ci, cj] = fix_steps
    return p.T, steps


_SCRATCH = threading.local()


def _scratch(name: str, shape: tuple, dtype) -> np.ndarray:
    """A work array (Fortran order) kept between calls, one set per thread: fresh pages cost a page
    fault each, a large share of a 128 x 512 chain's time."""
    cache = _SCRATCH.__dict__.setdefault("arrays", {})
    key = (name, shape, np.dtype(dtype))
    if key not in cache:
        if len(cache) > 16:
            cache.clear()
        cache[key] = np.zeros(shape, dtype, order="F")
    return cache[key]


def _pack_stats(x: np.ndarray):
    """(max |x_k|, min lsb(x_k)) over each row's pack of x [rows, pack, width] (float32 [rows,
    width]; lsb +Inf where all are zero), or (None, None) when x holds Inf / NaN."""
    top, low = np.abs(x[:, 0]), lsb(x[:, 0])
    for k in range(1, x.shape[1]):
        np.maximum(top, np.abs(x[:, k]), out=top)
        np.minimum(low, lsb(x[:, k]), out=low)
    if not np.isfinite(top.max(initial=0.0)):
        return None, None
    return top, low


def _folded_in_range(mw, lw, sw, ma, la, sa, pack) -> bool:
    """With the scales 2^sw, 2^sa folded in, the operands are float32 values (lsb >= 2^-149, below
    2^128), every term of a row is a multiple of 2^-149 and every row sum stays below 2^128.
    mw, lw [rows, M] / ma, la [rows, N]: max |x| and min lsb over each row's pack (lsb +Inf where
    all are zero); sw [rows, M], sa [rows, N]: scale exponents (a NaN one fails every comparison:
    declined)."""
    def rows(top, low, s):
        if s is None:
            return low.min(axis=1, initial=np.inf).astype(np.float64), top.max(axis=1, initial=0).astype(np.float64)
        f = np.exp2(s)
        return (low * f).min(axis=1, initial=np.inf), (top * f).max(axis=1, initial=0.0)
    (lw_row, mw_row), (la_row, ma_row) = rows(mw, lw, sw), rows(ma, la, sa)
    return bool(lw_row.min() >= TINY and la_row.min() >= TINY and mw_row.max() < HUGE and ma_row.max() < HUGE
                and (lw_row * la_row >= TINY).all() and (pack * mw_row * ma_row < HUGE).all())


def _dirty_cells(w32, a32, x: np.ndarray, y: np.ndarray, limit: float):
    """Cells (i, j) where some row's terms w[r, k, i] a[r, k, j] may have a partial sum that is not an
    fp32 value, as index arrays (each once).  Candidates: x[r, i] y[r, j] >= limit (float32 products
    may round, but limit is a power of two and rounding is monotonic, so the comparison is exact);
    each candidate (r, i, j) is then checked on its own terms: all are multiples of their smallest
    lsb q, and sum |t_k| < 2^24 q makes every partial sum an fp32 value."""
    ymax = y.max(axis=1, initial=0.0)
    xmax = x.max(axis=1, initial=0.0)
    if not (xmax * ymax >= limit).any():
        return np.zeros(0, np.intp), np.zeros(0, np.intp)
    r1, i1 = np.nonzero(x * ymax[:, None] >= limit)                   # i of some candidate in row r
    r2, j2 = np.nonzero(y * xmax[:, None] >= limit)                   # j of some candidate in row r
    per_row = np.bincount(r2, minlength=x.shape[0])
    rep = per_row[r1]                                                 # pair each (r, i) with row r's j
    rr, ii = np.repeat(r1, rep), np.repeat(i1, rep)
    jj = j2[np.repeat(np.cumsum(per_row)[r1] - np.cumsum(rep), rep) + np.arange(rep.sum())]
    keep = x[rr, ii] * y[rr, jj] >= limit
    rr, ii, jj = rr[keep], ii[keep], jj[keep]
    wt, at = w32[rr, :, ii], a32[rr, :, jj]                           # [candidates, pack]
    bound = np.abs(wt.astype(np.float64) * at).sum(axis=1)
    q = (lsb(wt).astype(np.float64) * lsb(at)).min(axis=1, initial=np.inf)
    dirty = bound >= 2.0 ** 24 * q
    cells = np.unique(ii[dirty] * y.shape[1] + jj[dirty])
    return cells // y.shape[1], cells % y.shape[1]


def cell_chain(wg: np.ndarray, ag: np.ndarray, partials: bool):
    """The chain of cells c with operands wg[:, :, c], ag[:, :, c] (float32 values [rows, pack, A]).
    When every partial sum of a cell is a multiple of its q (the smallest lsb of its terms, >= 2^-149)
    bounded by B with 2B < 2^53 q, float64 sums are exact and one cast per row is the one rounding
    (rounding to fp32 keeps a multiple of q one); otherwise fused_sum.  Returns ([A], [rows, A])."""
    rows, pack, cells = wg.shape
    terms = wg.astype(np.float64) * ag
    bound = np.abs(terms).sum(axis=(0, 1))
    q = (lsb(wg).astype(np.float64) * lsb(ag)).min(axis=(0, 1), initial=np.inf)
    p = np.zeros(cells, np.float32)
    out = np.empty((rows, cells), np.float32)
    if ((2 * bound < q * 2.0 ** 53) & (q >= TINY) & (bound < 2.0 ** 126)).all():
        sums = terms.sum(axis=1)
        for r in range(rows):
            p = (p + sums[r]).astype(np.float32)
            out[r] = p
    else:
        for r in range(rows):
            p = fused_sum(p, [terms[r, k] for k in range(pack)])
            out[r] = p
    return p, (out if partials else None)


def fp32_chain(ws: tuple, as_: tuple, partials: bool):
    """fp32-mode chains (D-10, D-12, D-T76): psum = fmaf(w, a, psum) per product, in order.

    ws, as_: (w,) and (a,) for one product per row (LOW's hi parts, HIGH's fp32 values), or
    (w_hi, w_lo) and (a_hi, a_lo) for LOW_HIGH's four fused adds per row (moving x stationary: hi*hi,
    hi*lo, lo*hi, lo*lo); each [rows, M] / [rows, N], fp32 values.  fmaf is D-10's step exactly (one
    rounding of the exact w a + psum, subnormals kept, IEEE specials), so there is no precondition:
    compiled loops (model/fma_kernels.py), as numpy and BLAS have no float32 FMA.  Returns
    (psum [M, N] float32, steps [rows, M, N] or None)."""
    from tensore.model import fma_kernels            # loads numba: the first fp32 matmul only
    k, m, n = ws[0].shape[0], ws[0].shape[1], as_[0].shape[1]
    if m % 2:                                        # the kernels take stationary columns in pairs
        ws = [np.pad(np.asarray(x, np.float32), ((0, 0), (0, 1))) for x in ws]
    p = np.zeros((m + m % 2, n), np.float32)
    steps = np.empty((k if partials else 0, m + m % 2, n), np.float32)
    args = [np.ascontiguousarray(x, np.float32) for x in (*ws, *as_)]
    (fma_kernels.chain1 if len(ws) == 1 else fma_kernels.chain4)(*args, p, steps)
    return p[:m], (steps[:, :m] if partials else None)


def repair_ties(p32, prev, cells, term_at):
    """Tie cells (flat indices of psum^T [N, M] in F order) after a float64 add and cast: where
    prev + term (term_at(j, i), exact float64) is exact in float64 the cast is the one rounding;
    the others get fused_sum."""
    n = p32.shape[0]
    jj, ii = cells % n, cells // n
    old, term = prev.astype(np.float64), term_at(jj, ii)
    bad = two_sum(old, term)[1] != 0
    if bad.any():
        p32[jj[bad], ii[bad]] = fused_sum(prev[bad], [term[bad]])
