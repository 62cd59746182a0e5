"""The PE array, functional level: dst = stationary.T @ moving, bit-exact (SPEC D-10..D-13, D-21).

Each column c runs a chain down the active rows: psum starts at +0 in the first row and every row
fuses its product(s) into it with one round to nearest even (D-10); multi-term steps sum exactly
first (D-11).  No np.matmul: the chain order is the hardware's, so the bits are the hardware's.
Codes go in (unsigned bit patterns of `in_dtype`), float32 comes out; a transposing matmul returns
the moved bit patterns (uint32)."""
from __future__ import annotations

import numpy as np
from scipy.linalg import blas as _blas

from tensore.model import dtypes as dt
from tensore.model.dtypes import Dtype, Gen
from tensore.model.fp import two_sum
from tensore.model.isa.enums import FP32Mode, MXPerfMode
from tensore.model.mac import canonical_nan, fused_sum

MX_BLOCK = 32                                   # elements sharing one E8M0 scale (D-21)
PACK = {None: 1, "double_row": 2, MXPerfMode.NONE: 1,
        MXPerfMode.QUAD_ROW: 4, MXPerfMode.QUAD_ROW_INTERLEAVE: 4, MXPerfMode.QUAD_ROW_TILED: 4,
        MXPerfMode.OCT_ROW: 8, MXPerfMode.OCT_ROW_INTERLEAVE: 8, MXPerfMode.OCT_ROW_TILED: 8}
_SIG_BITS = {Dtype.FP8_EXP2: 6, Dtype.FP8_EXP3: 5, Dtype.FP8_EXP4: 4, Dtype.FP8_EXP5: 3,
             Dtype.BFLOAT16: 8, Dtype.FP16: 11, Dtype.FP32: 24, Dtype.FP4_EXP2: 2, Dtype.INT4: 4}
FP32_PASSES = {FP32Mode.NONE: 1, FP32Mode.LOW: 1, FP32Mode.HIGH: 4, FP32Mode.LOW_HIGH: 4}   # D-12


def _parse_perf(perf_mode):
    if perf_mode is None or isinstance(perf_mode, MXPerfMode):
        return perf_mode
    if isinstance(perf_mode, str):
        if perf_mode.lower() == "double_row":
            return "double_row"
        return MXPerfMode[perf_mode.upper()]
    return MXPerfMode(int(perf_mode))


def _values(codes, dtype, gen, e4m3):
    return dt.to_fp32(codes, dtype, gen, e4m3=e4m3).astype(np.float64)


def _scales(codes, blocks: int, width: int, name: str) -> np.ndarray:
    """E8M0 scale exponents (float64, NaN for 0xFF) of shape [blocks, width]."""
    s = np.asarray(codes)
    if s.shape != (blocks, width):
        raise ValueError(f"{name} must have shape {(blocks, width)} (one E8M0 code per "
                         f"{MX_BLOCK} contraction elements), got {s.shape}")
    s = s.astype(np.int64)
    if s.min(initial=0) < 0 or s.max(initial=0) > 0xFF:
        raise ValueError(f"{name} are E8M0 byte codes")
    return np.where(s == 0xFF, np.nan, s - 127.0)


def _single_product_chain(a, w, sig_bits, partials):
    """Rows with one product each: the fast exact paths.

    A product of <= 24 significant bits that stays in fp32's normal range is exact in float32,
    so the IEEE float32 add *is* the fused RNE add.  Outside that range a float64 add and one
    round to fp32 is still exact for such products: a double-rounding error needs the float64
    sum to land on an fp32 tie it is not, which takes a product of 25+ bits (one that can itself
    be a tie) or one of 30+ bits.  Wider products (fp32 LOW / HIGH / LOW_HIGH) go through
    fused_sum."""
    k, m, n = a.shape[0], w.shape[1], a.shape[1]
    psum = np.zeros((m, n), np.float32)
    steps = [] if partials else None
    fin_a, fin_w = a[np.isfinite(a) & (a != 0)], w[np.isfinite(w) & (w != 0)]
    in_range = True
    if fin_a.size and fin_w.size:
        lo = np.abs(fin_a).min() * np.abs(fin_w).min()
        hi = np.abs(fin_a).max() * np.abs(fin_w).max()
        in_range = lo >= 2.0 ** -126 and hi < 2.0 ** 128
    if sig_bits <= 24 and in_range and np.isfinite(a).all() and np.isfinite(w).all():
        # BLAS rank-1 updates: every product is exact, so mul+add and FMA give the fused RNE sum.
        # A BLAS may skip zero products; that is harmless here because psum starts at +0 and,
        # with every product a multiple of 2^-149, never becomes -0 (an exact zero sum is +0).
        w32, a32 = w.astype(np.float32), a.astype(np.float32)
        psum = np.zeros((m, n), np.float32, order="F")
        for r in range(k):
            psum = _blas.sger(1.0, w32[r], a32[r], a=psum, overwrite_a=1)
            if partials:        # a copy: for M == 1 or N == 1 psum is C-contiguous too (no copy)
                steps.append(np.array(psum, order="C"))
        psum = np.array(psum, order="C")
    elif sig_bits <= 24 and in_range:
        wc, ar = w.astype(np.float32)[:, :, None], a.astype(np.float32)[:, None, :]
        prod = np.empty((m, n), np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            for r in range(k):
                np.multiply(wc[r], ar[r], out=prod)
                np.add(psum, prod, out=psum)
                if partials:
                    steps.append(psum.copy())
    elif sig_bits <= 24:
        wc, ar = w[:, :, None], a[:, None, :]
        prod = np.empty((m, n))
        with np.errstate(invalid="ignore", over="ignore"):
            for r in range(k):
                np.multiply(wc[r], ar[r], out=prod)
                np.add(psum, prod, out=prod)
                psum = prod.astype(np.float32)
                if partials:
                    steps.append(psum)
    elif _wide_ok([w], [a]):
        with np.errstate(over="ignore"):
            return _wide_chain([(w[r], a[r]) for r in range(k)], m, n, 1, partials)
    else:
        for r in range(k):
            with np.errstate(invalid="ignore"):
                psum = fused_sum(psum, [np.multiply.outer(w[r], a[r])])
            if partials:
                steps.append(psum)
    return psum, steps


_MID_MASK, _MID = np.uint64((1 << 29) - 1), np.uint64(1 << 28)    # float64 bits of an fp32 tie


def _min_lsb(x: np.ndarray) -> float:
    """The weight of the lowest set significand bit over the non-zero finite values of x (0 if none)."""
    x = np.abs(x[(x != 0)])
    if not x.size:
        return 0.0
    mant, exp = np.frexp(x)
    mi = (mant * 2.0 ** 53).astype(np.int64)
    return float(np.min(np.ldexp((mi & -mi).astype(np.float64), exp - 53)))


def _wide_ok(ws: list, as_: list) -> bool:
    """Fast wide-product chain allowed: finite operands whose products are multiples of 2^-149, so
    every product is exact in float64 and a sum in fp32's subnormal range is exact there too."""
    if not all(np.isfinite(x).all() for x in ws + as_):
        return False
    lw, la = min((_min_lsb(x) or np.inf) for x in ws), min((_min_lsb(x) or np.inf) for x in as_)
    return lw * la >= 2.0 ** -149


def _wide_chain(terms: list, m: int, n: int, per_row: int, partials: bool):
    """psum = RNE_fp32(psum + w (x) a) for each (w, a[, narrow]) in order, one exact product per step
    (D-10).  A narrow step (product exact in float32, in its normal range) is a float32 rank-1 update.
    A wide one is a float64 rank-1 update (exact product, one rounding) and a cast to fp32 (a second
    rounding); the two differ from one rounding only where the float64 sum is exactly an fp32 tie and
    the exact sum is not (an fp32 tie is a float64 number, so it cannot lie strictly between the exact
    sum and its float64 rounding): those cells are redone with fused_sum.  Preconditions: _wide_ok."""
    p64 = np.zeros((m, n), order="F")
    p32 = np.zeros((m, n), np.float32, order="F")
    steps = []
    for i, (w, a, *narrow) in enumerate(terms):
        if narrow and narrow[0]:
            p32 = _blas.sger(1.0, w.astype(np.float32), a.astype(np.float32), a=p32, overwrite_a=1)
        else:
            np.copyto(p64, p32)
            p64 = _blas.dger(1.0, w, a, a=p64, overwrite_a=1)
            tie = (p64.view(np.uint64) & _MID_MASK) == _MID
            prev, p32 = p32, p64.astype(np.float32, order="F")
            if tie.any():
                _repair_ties(p32, prev, tie, lambda rr, cc: w[rr] * a[cc])
        if partials and (i + 1) % per_row == 0:
            steps.append(np.array(p32, order="C"))
    return np.array(p32, order="C"), steps


def _repair_ties(p32, prev, tie, term_at):
    """Cells whose float64 sum fell on an fp32 tie: where prev + term was exact in float64 the cast
    is right; the others get fused_sum.  term_at(rows, cols) gives the exact float64 terms."""
    m = p32.shape[0]
    idx = np.flatnonzero(tie.ravel(order="F"))          # F order: a view, no copy
    rr, cc = idx % m, idx // m
    old, term = prev[rr, cc].astype(np.float64), term_at(rr, cc)
    bad = two_sum(old, term)[1] != 0
    if bad.any():
        p32[rr[bad], cc[bad]] = fused_sum(prev[rr[bad], cc[bad]], [term[bad]])


def _products_in_f32(ws: list, as_: list) -> bool:
    """Every non-zero product of an element of ws by one of as_ is in fp32's normal range."""
    def span(xs):
        nz = [np.abs(x[x != 0]) for x in xs]
        nz = [x for x in nz if x.size]
        return (min(x.min() for x in nz), max(x.max() for x in nz)) if nz else (1.0, 1.0)
    (lw, hw), (la, ha) = span(ws), span(as_)
    return lw * la >= 2.0 ** -126 and hw * ha < 2.0 ** 128


def _exact_f64(w: np.ndarray, a: np.ndarray) -> bool:
    """Every partial sum of a chain with multi-term steps is exact in float64: w [rows, pack, M] and
    a [rows, pack, N] finite, all products multiples of q, |psum| bounded by B with 2B < 2^53 q.
    (Rounding to fp32 keeps a multiple of q a multiple of q.)"""
    if not (np.isfinite(w).all() and np.isfinite(a).all()):
        return False
    q = _min_lsb(w) * _min_lsb(a)
    bound = float(np.sum(np.abs(w).max(axis=2) * np.abs(a).max(axis=2)))
    return q > 0 and 2 * bound < q * 2.0 ** 53


def _fast_multi(w, a, scales):
    """A fast exact chain for multi-term rows (D-11, D-21), or None: with the block scales folded into
    the operands (powers of two: exact), _packed_chain when every partial sum is exact in float64,
    else _row_sum_chain when each row's products sum exactly in float64 (checked on the unscaled
    values, as a row's products share one scale) and products are multiples of 2^-149."""
    if scales is not None:
        if not (np.isfinite(scales[0]).all() and np.isfinite(scales[1]).all()):
            return None
        ws, as_ = w * np.exp2(scales[0])[:, None, :], a * np.exp2(scales[1])[:, None, :]
    else:
        ws, as_ = w, a
    if _exact_f64(ws, as_):
        return lambda partials: _packed_chain(ws, as_, partials)
    if not (np.isfinite(ws).all() and np.isfinite(as_).all()):
        return None
    pack = w.shape[1]
    q = _min_lsb(w) * _min_lsb(a)
    row_exact = q > 0 and 2 * pack * np.abs(w).max() * np.abs(a).max() < q * 2.0 ** 53
    if row_exact and _wide_ok([ws], [as_]):
        return lambda partials: _row_sum_chain(ws, as_, partials)
    return None


def _row_sum_chain(w, a, partials):
    """Each row's products summed in float64 (exact by _fast_multi's check), then one wide step:
    the float64 add and fp32 cast, with _wide_chain's tie repair."""
    rows, pack, m = w.shape
    n = a.shape[2]
    p32 = np.zeros((m, n), np.float32, order="F")
    t = np.zeros((m, n), order="F")
    steps = []
    for r in range(rows):
        t[:] = 0.0
        for j in range(pack):
            t = _blas.dger(1.0, w[r, j], a[r, j], a=t, overwrite_a=1)
        y = p32 + t
        tie = (y.view(np.uint64) & _MID_MASK) == _MID
        prev, p32 = p32, y.astype(np.float32, order="F")
        if tie.any():
            _repair_ties(p32, prev, tie, lambda rr, cc: t[rr, cc])
        if partials:
            steps.append(np.array(p32, order="C"))
    return np.array(p32, order="C"), steps


def _packed_chain(w: np.ndarray, a: np.ndarray, partials: bool):
    """Multi-term steps (D-11) when _exact_f64 holds: the pack products of a row are added to the
    running sum in float64 without error, so one cast to fp32 is the one RNE rounding."""
    rows, pack, m = w.shape
    p64 = np.zeros((m, a.shape[2]), order="F")
    steps = []
    for r in range(rows):
        for j in range(pack):
            p64 = _blas.dger(1.0, w[r, j], a[r, j], a=p64, overwrite_a=1)
        p32 = p64.astype(np.float32, order="F")
        np.copyto(p64, p32)
        if partials:
            steps.append(np.array(p32, order="C"))
    return np.array(p32, order="C"), steps


def column_chain(w, a, *, sig_bits: int = 48, fp32_mode=None, scales=None, partials=False):
    """The column chains on decoded values: the one implementation behind matmul() and the engine.

    w: float64 [rows, pack, M] stationary values; a: float64 [rows, pack, N] moving values.
    scales: None, or (sw [rows, M], sa [rows, N]) E8M0 exponents (NaN for a NaN scale) of the MX
      block each row's products belong to (D-21).  fp32_mode: LOW / HIGH / LOW_HIGH for FP32 (D-12).
    sig_bits: significant bits of one product (selects an exact fast path).
    Returns psum [M, N] float32 (canonical NaN), and with `partials` the per-row psums too."""
    rows, pack, m = w.shape
    n = a.shape[2]
    psum = np.zeros((m, n), np.float32)
    if fp32_mode in (FP32Mode.LOW, FP32Mode.HIGH, FP32Mode.LOW_HIGH):
        return _finish(_fp32(a[:, 0], w[:, 0], FP32Mode(fp32_mode), partials))
    if pack == 1 and scales is None:
        psum, steps = _single_product_chain(a[:, 0], w[:, 0], sig_bits, partials)
        return _finish((psum, steps) if partials else psum)
    fast = _fast_multi(w, a, scales)
    if fast is not None:
        with np.errstate(over="ignore"):                 # fp32 overflow: the cast gives +-Inf (RNE)
            result = fast(partials)
        return _finish(result if partials else result[0])
    steps = []
    for r in range(rows):
        with np.errstate(invalid="ignore", over="ignore"):
            terms = [np.multiply.outer(w[r, j], a[r, j]) for j in range(pack)]
            if scales is not None:
                scale = np.exp2(scales[0][r][:, None] + scales[1][r][None, :])   # exact, or NaN
                terms = [t * scale for t in terms]
        psum = fused_sum(psum, terms)
        if partials:
            steps.append(psum)
    return _finish((psum, steps) if partials else psum)


def sig_bits_of(dtype) -> int:
    return _SIG_BITS[Dtype.parse(dtype)]


def matmul(stationary, moving, *, in_dtype, gen, stationary_dtype=None, fp32_mode=None,
           perf_mode=None, stationary_scales=None, moving_scales=None, tags=None,
           xpose=False, e4m3=None, partials=False):
    """dst[M, N] (float32) = stationary[K, M].T @ moving[K, N], bit-exact per SPEC section 4.

    in_dtype / stationary_dtype: the moving / stationary formats (fp8, bf16 and fp16 may mix; FP32
      only with FP32).  fp32_mode: LOW, HIGH or LOW_HIGH for FP32 (D-12).
    perf_mode: "double_row" (FP8, 2 products per PE step) or an MX_PERF_MODE (4 / 8, with
      stationary_scales [K/32, M] and moving_scales [K/32, N] E8M0 codes, D-21).
    tags: [K, M] fmap selectors for MatmulSparse; moving is then [K, F, N].
    xpose: a transposing matmul: returns moving's bit patterns as uint32 [N, K] (D-13).
    partials: also return the per-row partial sums [rows, M, N] (for the cycle model).
    """
    gen = Gen.parse(gen)
    in_dtype = Dtype.parse(in_dtype)
    st_dtype = Dtype.parse(stationary_dtype) if stationary_dtype is not None else in_dtype
    moving, stationary = np.asarray(moving), np.asarray(stationary)
    if xpose:
        return transpose(moving, in_dtype, gen)
    perf = _parse_perf(perf_mode)
    pack = PACK[perf]
    mx = isinstance(perf, MXPerfMode) and perf != MXPerfMode.NONE
    fp32_mode = FP32Mode.NONE if fp32_mode is None else (
        FP32Mode[fp32_mode.upper()] if isinstance(fp32_mode, str) else FP32Mode(fp32_mode))
    _validate(in_dtype, st_dtype, gen, fp32_mode, perf, mx)
    if tags is not None:
        return _sparse(stationary, moving, np.asarray(tags), in_dtype, st_dtype, gen, e4m3, partials)
    if stationary.ndim != 2 or moving.ndim != 2 or stationary.shape[0] != moving.shape[0]:
        raise ValueError(f"stationary [K, M] and moving [K, N] must share K; got {stationary.shape} "
                         f"and {moving.shape}")
    k_total, m = stationary.shape
    n = moving.shape[1]
    if k_total % pack:
        raise ValueError(f"K = {k_total} is not a multiple of the {pack} elements per PE step")
    rows = k_total // pack
    a, w = _values(moving, in_dtype, gen, e4m3), _values(stationary, st_dtype, gen, e4m3)
    scales = None
    if mx:
        if k_total % MX_BLOCK:
            raise ValueError(f"MX needs K to be a multiple of {MX_BLOCK}, got {k_total}")
        blocks = k_total // MX_BLOCK
        sw = _scales(stationary_scales, blocks, m, "stationary_scales")
        sa = _scales(moving_scales, blocks, n, "moving_scales")
        block_of_row = (np.arange(rows) * pack) // MX_BLOCK
        scales = (sw[block_of_row], sa[block_of_row])
    return column_chain(w.reshape(rows, pack, m), a.reshape(rows, pack, n),
                        sig_bits=_SIG_BITS[in_dtype] + _SIG_BITS[st_dtype], fp32_mode=fp32_mode,
                        scales=scales, partials=partials)


def _fp32(a, w, mode, partials):
    """fp32_mode passes (D-12): LOW one pass on hi parts, HIGH one exact product, LOW_HIGH four
    fused adds per row (moving*stationary: hi*hi, hi*lo, lo*hi, lo*lo) before the sum moves down
    (D-T24: the passes are sub-steps inside each PE)."""
    a_hi, a_lo = (x.astype(np.float64) for x in dt.split_fp32(a.astype(np.float32)))
    w_hi, w_lo = (x.astype(np.float64) for x in dt.split_fp32(w.astype(np.float32)))
    if mode == FP32Mode.LOW:
        return _single_product_chain(a_hi, w_hi, 28, partials) if partials else \
            _single_product_chain(a_hi, w_hi, 28, False)[0]
    if mode == FP32Mode.HIGH:
        psum, steps = _single_product_chain(a, w, 48, partials)
        return (psum, steps) if partials else psum
    if _wide_ok([w_hi, w_lo], [a_hi, a_lo]):
        # hi*hi has up to 28 bits (wide); the others <= 24 bits: float32 when in range
        narrow = _products_in_f32([w_hi, w_lo], [a_lo]) and _products_in_f32([w_lo], [a_hi])
        terms = [(pw[r], pa[r], narrow and not (pa is a_hi and pw is w_hi)) for r in range(a.shape[0])
                 for pa, pw in ((a_hi, w_hi), (a_hi, w_lo), (a_lo, w_hi), (a_lo, w_lo))]
        with np.errstate(over="ignore"):
            psum, steps = _wide_chain(terms, w.shape[1], a.shape[1], 4, partials)
        return (psum, steps) if partials else psum
    psum, steps = np.zeros((w.shape[1], a.shape[1]), np.float32), []
    with np.errstate(invalid="ignore", over="ignore"):
        for r in range(a.shape[0]):
            for pa, pw in ((a_hi, w_hi), (a_hi, w_lo), (a_lo, w_hi), (a_lo, w_lo)):
                psum = fused_sum(psum, [np.multiply.outer(pw[r], pa[r])])
            if partials:
                steps.append(psum)
    return (psum, steps) if partials else psum


def _sparse(stationary, moving, tags, in_dtype, st_dtype, gen, e4m3, partials):
    """MatmulSparse: dst[c, n] = sum_r W[r, c] * moving[r, tag[r, c], n] (seed 000 section 9)."""
    if moving.ndim != 3:
        raise ValueError(f"sparse moving data is [K, F, N], got shape {moving.shape}")
    k, f, n = moving.shape
    if f not in (2, 3, 4):
        raise ValueError(f"MatmulSparse sends 2, 3 or 4 fmaps per partition, got {f}")
    if stationary.shape[0] != k or tags.shape != stationary.shape:
        raise ValueError(f"stationary and tags must be [K={k}, M], got {stationary.shape} / {tags.shape}")
    if tags.min(initial=0) < 0 or tags.max(initial=0) >= f:
        raise ValueError(f"tags select fmaps 0..{f - 1}")
    a, w = _values(moving, in_dtype, gen, e4m3), _values(stationary, st_dtype, gen, e4m3)
    if _SIG_BITS[in_dtype] + _SIG_BITS[st_dtype] <= 24 and np.isfinite(a).all() and np.isfinite(w).all() \
            and _products_in_f32([w], [a]):
        return _sparse_f32(w, a, tags, partials)
    gathered = a[np.arange(k)[:, None], tags, :]                     # [K, M, N]
    psum = np.zeros((stationary.shape[1], n), np.float32)
    steps = []
    for r in range(k):
        with np.errstate(invalid="ignore", over="ignore"):
            psum = (psum + w[r][:, None] * gathered[r]).astype(np.float32)   # <= 22-bit products
        if partials:
            steps.append(psum)
    return _finish((psum, steps) if partials else psum)


def _sparse_f32(w, a, tags, partials):
    """Sparse rows as one float32 rank-1 update per fmap with the weights of the other fmaps' PEs
    zeroed: products (<= 22 bits, normal range) are exact in float32, the zero ones add exactly."""
    k, f, n = a.shape
    w32, a32 = w.astype(np.float32), a.astype(np.float32)
    psum = np.zeros((w.shape[1], n), np.float32, order="F")
    steps = []
    for r in range(k):
        for j in range(f):
            sel = tags[r] == j
            if sel.any():
                psum = _blas.sger(1.0, np.where(sel, w32[r], np.float32(0)), a32[r, j], a=psum, overwrite_a=1)
        if partials:
            steps.append(np.array(psum, order="C"))
    return _finish((np.array(psum, order="C"), steps) if partials else np.array(psum, order="C"))


def transpose(moving, in_dtype, gen) -> np.ndarray:
    """D-13: moving[k, n] lands in partition n, element k, bit for bit (8-bit codes zero-extended)."""
    fmt = dt.format_of(in_dtype, gen)
    if fmt.width > 32:
        raise ValueError(f"{Dtype(in_dtype).name} cannot be transposed (8/16/32-bit data only)")
    codes = np.asarray(moving)
    if codes.ndim != 2:
        raise ValueError(f"moving must be [K, N], got shape {codes.shape}")
    if codes.dtype.kind not in "ui" or (codes.size and (codes.min() < 0 or int(codes.max()) >> fmt.width)):
        raise ValueError(f"moving codes must be {fmt.width}-bit unsigned patterns")
    return codes.astype(np.uint32).T.copy()


def _finish(result):
    if isinstance(result, tuple):
        psum, steps = result
        return canonical_nan(psum), [canonical_nan(s) for s in steps]
    return canonical_nan(result)


def _validate(in_dtype, st_dtype, gen, fp32_mode, perf, mx):
    from tensore.model.isa.check import matmul_input_dtypes
    for name, d in (("in_dtype", in_dtype), ("stationary_dtype", st_dtype)):
        if not dt.is_in_enum(d, gen):
            raise ValueError(f"{name} {d.name} does not exist on {gen.name}")
        ok = dt.is_valid_mx_dtype(d, gen) if mx else d in matmul_input_dtypes(gen)
        if not ok:
            raise ValueError(f"{name} {d.name} is not a{'n MX element' if mx else ' matmul input'} dtype")
    if (in_dtype == Dtype.FP32) != (st_dtype == Dtype.FP32):
        raise ValueError("FP32 (tf32) operands cannot mix with low-precision ones (seed 000 section 8)")
    if in_dtype == Dtype.FP32 and fp32_mode == FP32Mode.NONE:
        raise ValueError("FP32 input needs fp32_mode LOW, HIGH or LOW_HIGH (D-12)")
    if in_dtype != Dtype.FP32 and fp32_mode != FP32Mode.NONE:
        raise ValueError("fp32_mode applies to FP32 input only")
    if perf == "double_row" and not ({in_dtype, st_dtype} <= {Dtype.FP8_EXP2, Dtype.FP8_EXP3,
                                                                Dtype.FP8_EXP4, Dtype.FP8_EXP5}):
        raise ValueError("double_row needs FP8 operands")
