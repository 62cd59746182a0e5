"""The PE array, functional level: dst = stationary.T @ moving, bit-exact (SPEC D-10..D-13, D-21).

Each column c runs a chain down the active rows: psum starts at +0 in the first row and every row
fuses its product(s) into it with one round to nearest even (D-10); multi-term steps sum exactly
first (D-11).  No np.matmul: the chain order is the hardware's, so the bits are the hardware's.
Codes go in (unsigned bit patterns of `in_dtype`), float32 comes out; a transposing matmul returns
the moved bit patterns (uint32)."""
from __future__ import annotations

import functools

import numpy as np
from scipy.linalg import blas as _blas

from tensore.model import dtypes as dt
from tensore.model import fastpaths as fast
from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa.enums import FP32Mode, MXPerfMode
from tensore.model.isa.microop import DOUBLE_ROW_PACK, FP32_PASSES, MX_BLOCK, PUMP_PACK  # noqa: F401 (FP32_PASSES: kernels)
from tensore.model.mac import canonical_nan, fused_sum

PACK = {None: 1, "double_row": DOUBLE_ROW_PACK, **PUMP_PACK}
_SIG_BITS = {Dtype.FP8_EXP2: 6, Dtype.FP8_EXP3: 5, Dtype.FP8_EXP4: 4, Dtype.FP8_EXP5: 3,
             Dtype.BFLOAT16: 8, Dtype.FP16: 11, Dtype.FP32: 24, Dtype.FP4_EXP2: 2, Dtype.INT4: 4}


def widen64(x) -> np.ndarray:
    """float64 of float32 values, exactly; a signalling NaN (the exact float32 of a NaN code, D-T05)
    becomes a quiet NaN.  IEEE flags that conversion invalid, which numpy reports as a RuntimeWarning;
    nothing reads a NaN value's payload (the codes are kept beside the values, NaN results are
    canonical, D-10), so the flag is ignored for this cast alone."""
    with np.errstate(invalid="ignore"):
        return np.asarray(x).astype(np.float64)


def _parse_perf(perf_mode):
    if perf_mode is None or isinstance(perf_mode, MXPerfMode):
        return perf_mode
    if isinstance(perf_mode, str):
        if perf_mode.lower() == "double_row":
            return "double_row"
        return MXPerfMode[perf_mode.upper()]
    return MXPerfMode(int(perf_mode))


def _values(codes, dtype, gen, e4m3):
    """float32 values of codes (exact): a cached dt.to_fp32 table when the code type spans exactly
    the format's width (every code valid), else dt.to_fp32 with its checks."""
    codes = np.asarray(codes)
    fmt = dt.format_of(dtype, gen, e4m3=e4m3)
    if codes.dtype.kind == "u" and codes.dtype.itemsize * 8 == fmt.width <= 16:
        return np.take(_decode_table(Dtype(dtype), gen, e4m3), codes)
    return dt.to_fp32(codes, dtype, gen, e4m3=e4m3)


@functools.cache
def _decode_table(dtype: Dtype, gen: Gen, e4m3) -> np.ndarray:
    fmt = dt.format_of(dtype, gen, e4m3=e4m3)
    return dt.to_fp32(np.arange(1 << fmt.width, dtype=dt.code_dtype(fmt)), dtype, gen, e4m3=e4m3)


def _scales(codes, blocks: int, width: int, name: str) -> np.ndarray:
    """E8M0 scale exponents (float64, NaN for 0xFF) of shape [blocks, width]."""
    s = np.asarray(codes)
    if dt.numpy_format(s.dtype) is dt.E8M0:
        s = s.view(np.uint8)
    if s.shape != (blocks, width):
        raise ValueError(f"{name} must have shape {(blocks, width)} (one E8M0 code per "
                         f"{MX_BLOCK} contraction elements), got {s.shape}")
    s = s.astype(np.int64)
    if s.min(initial=0) < 0 or s.max(initial=0) > 0xFF:
        raise ValueError(f"{name} are E8M0 byte codes")
    return dt.e8m0_exponents(s)


def _single_product_chain(a, w, sig_bits, partials):
    """Rows with one product each (D-10), exact on every path.

    Products of <= 24 significant bits that are multiples of 2^-149 below 2^128 are exact in
    float32: fastpaths.rank1_chain (D-T53, D-T75).  A value with s significant bits has its lowest
    bit above |x| 2^-s, so min|w| min|a| >= 2^(sig_bits - 149) makes every product a multiple of
    2^-149.  Non-finite operands: float32 multiply and add (IEEE specials are D-10's).  Products
    out of fp32's range: a float64 add and one round to fp32, still exact for such products (a
    double-rounding error needs the float64 sum to land on an fp32 tie it is not, which takes a
    product of 25+ bits or one of 30+ bits).  Wider products (fp32 values): fastpaths.fp32_chain."""
    if sig_bits > 24:
        return fast.fp32_chain((w,), (a,), partials)
    k, m, n = a.shape[0], w.shape[1], a.shape[1]
    psum = np.zeros((m, n), np.float32)
    steps = [] if partials else None
    (hw, lw), (ha, la) = fast.abs_span(w), fast.abs_span(a)
    finite = np.isfinite(hw) and np.isfinite(ha)
    if finite and lw * la >= 2.0 ** (sig_bits - 149) and hw * ha < fast.HUGE:
        w32, a32 = np.ascontiguousarray(w, np.float32), np.ascontiguousarray(a, np.float32)
        psum, steps = fast.rank1_chain(w32, a32, partials)
        return psum, (list(steps) if partials else None)
    in_range = lw * la >= 2.0 ** -126 and hw * ha < 2.0 ** 128 if finite else _finite_in_range(w, a)
    if in_range:
        wc, ar = w.astype(np.float32)[:, :, None], a.astype(np.float32)[:, None, :]
        prod = np.empty((m, n), np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            for r in range(k):
                np.multiply(wc[r], ar[r], out=prod)
                np.add(psum, prod, out=psum)
                if partials:
                    steps.append(psum.copy())
    else:
        wc, ar = widen64(w)[:, :, None], widen64(a)[:, None, :]
        prod = np.empty((m, n))
        with np.errstate(invalid="ignore", over="ignore"):
            for r in range(k):
                np.multiply(wc[r], ar[r], out=prod)
                np.add(psum, prod, out=prod)
                psum = prod.astype(np.float32)
                if partials:
                    steps.append(psum)
    return psum, steps


def _finite_in_range(w, a) -> bool:
    """Every non-zero product of finite elements is in fp32's normal range."""
    fw, fa = w[np.isfinite(w)], a[np.isfinite(a)]
    (hw, lw), (ha, la) = fast.abs_span(fw), fast.abs_span(fa)
    return not (fw[fw != 0].size and fa[fa != 0].size) or (lw * la >= 2.0 ** -126 and hw * ha < 2.0 ** 128)


def _min_lsb(x: np.ndarray) -> float:
    """The weight of the lowest set significand bit over the non-zero finite values of x (0 if none)."""
    x = np.asarray(x, np.float64)
    low = fast.lsb(x[np.isfinite(x)]).min(initial=np.inf)
    return 0.0 if low == np.inf else float(low)


def _wide_ok(ws: list, as_: list) -> bool:
    """Fast wide-product chain allowed: finite operands whose products are multiples of 2^-149, so
    every product is exact in float64 and a sum in fp32's subnormal range is exact there too."""
    if not all(np.isfinite(x).all() for x in ws + as_):
        return False
    lw, la = min((_min_lsb(x) or np.inf) for x in ws), min((_min_lsb(x) or np.inf) for x in as_)
    return lw * la >= 2.0 ** -149


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
    """A float64 exact chain for multi-term rows (D-11, D-21) when fastpaths.multi_chain declines
    (folded operands beyond fp32's range), or None: with the block scales folded into the operands
    (powers of two: exact), _packed_chain when every partial sum is exact in float64, else
    _row_sum_chain when each row's products sum exactly in float64 (checked on the unscaled values,
    as a row's products share one scale) and products are multiples of 2^-149."""
    if scales is not None:
        if not (np.isfinite(scales[0]).all() and np.isfinite(scales[1]).all()):
            return None
        ws, as_ = fast.block_scaled(w, scales[0]), fast.block_scaled(a, scales[1])
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
    the float64 add and fp32 cast, with fastpaths.repair_ties."""
    rows, pack, m = w.shape
    n = a.shape[2]
    p32 = np.zeros((n, m), np.float32, order="F")
    t = np.zeros((n, m), order="F")
    steps = []
    for r in range(rows):
        t[:] = 0.0
        for j in range(pack):
            t = _blas.dger(1.0, a[r, j], w[r, j], a=t, overwrite_a=1)
        y = p32 + t
        tie = (y.view(np.uint64) & fast.MID_MASK) == fast.MID
        prev, p32 = p32, y.astype(np.float32, order="F")
        if tie.any():
            cells = np.flatnonzero(tie.ravel(order="K"))
            fast.repair_ties(p32, prev.ravel(order="K")[cells], cells, lambda jj, ii, t=t: t[jj, ii])
        if partials:
            steps.append(np.array(p32.T))
    return p32.T, steps


def _packed_chain(w: np.ndarray, a: np.ndarray, partials: bool):
    """Multi-term steps (D-11) when _exact_f64 holds: the pack products of a row are added to the
    running sum in float64 without error, so one cast to fp32 is the one RNE rounding."""
    rows, pack, m = w.shape
    p64 = np.zeros((a.shape[2], m), order="F")
    p32 = np.zeros((a.shape[2], m), np.float32, order="F")
    steps = []
    for r in range(rows):
        for j in range(pack):
            p64 = _blas.dger(1.0, a[r, j], w[r, j], a=p64, overwrite_a=1)
        np.copyto(p32, p64, casting="unsafe")
        np.copyto(p64, p32)
        if partials:
            steps.append(np.array(p32.T))
    return p32.T, steps


def column_chain(w, a, *, sig_bits: int = 48, fp32_mode=None, scales=None, partials=False):
    """The column chains on decoded values: the one implementation behind matmul() and the engine.

    w: [rows, pack, M] stationary values; a: [rows, pack, N] moving values (float32 or float64).
    scales: None, or (sw [rows, M], sa [rows, N]) E8M0 exponents (NaN for a NaN scale) of the MX
      block each row's products belong to (D-21).  fp32_mode: LOW / HIGH / LOW_HIGH for FP32 (D-12).
    sig_bits: significant bits of one product (selects an exact fast path).
    Returns psum [M, N] float32 (canonical NaN), and with `partials` the per-row psums too.
    Multi-term rows: fastpaths.multi_chain (float32 row sums, D-T75), else _fast_multi (float64),
    else fused_sum per row."""
    rows, pack, m = w.shape
    n = a.shape[2]
    if fp32_mode in (FP32Mode.LOW, FP32Mode.HIGH, FP32Mode.LOW_HIGH):
        return _finish(_fp32(a[:, 0], w[:, 0], FP32Mode(fp32_mode), partials), partials)
    if pack == 1 and scales is None:
        return _finish(_single_product_chain(a[:, 0], w[:, 0], sig_bits, partials), partials)
    result = fast.multi_chain(w, a, scales, partials)
    if result is None:
        w, a = widen64(w), widen64(a)
        chain = _fast_multi(w, a, scales)
        if chain is not None:
            with np.errstate(over="ignore"):             # fp32 overflow: the cast gives +-Inf (RNE)
                result = chain(partials)
    if result is not None:
        return _finish(result, partials)
    if scales is not None:                              # exact products of the scaled values, or NaN
        w, a = fast.block_scaled(w, scales[0]), fast.block_scaled(a, scales[1])
    psum, steps = np.zeros((m, n), np.float32), []
    for r in range(rows):
        with np.errstate(invalid="ignore", over="ignore"):
            terms = [np.multiply.outer(w[r, j], a[r, j]) for j in range(pack)]
        psum = fused_sum(psum, terms)
        if partials:
            steps.append(psum)
    return _finish((psum, steps), partials)


def sig_bits_of(dtype) -> int:
    """Significand bits of a matmul input format (the product of two has at most the sum)."""
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

    Operands are codes or values (dtypes.codes_of): unsigned integer arrays are the formats' bit
    patterns; an ml_dtypes / numpy array of the operand's own format (bfloat16 for BFLOAT16,
    float32 for FP32, float8_e4m3fn for MARIANA's FP8_EXP4, ...) is taken bit for bit; any other
    float array (float32, float64, another ml_dtypes format) is values, converted only where
    exact: a value the format cannot hold raises ValueError (round first, e.g. with
    dtypes.from_fp32).  Other element types raise TypeError.  MX scales are E8M0 byte codes or an
    ml_dtypes float8_e8m0fnu array.
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
    moving = dt.codes_of(moving, in_dtype, gen, e4m3=e4m3, name="moving")
    stationary = dt.codes_of(stationary, st_dtype, gen, e4m3=e4m3, name="stationary")
    if tags is not None:
        return _sparse(stationary, moving, np.asarray(tags), in_dtype, st_dtype, gen, e4m3, partials, fp32_mode)
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
    (D-T24: the passes are sub-steps inside each PE).  Each is an fmaf chain
    (fastpaths.fp32_chain, D-T76), exact for every input.  Returns (psum, steps)."""
    a32, w32 = np.asarray(a, np.float32), np.asarray(w, np.float32)
    if mode == FP32Mode.HIGH:
        return fast.fp32_chain((w32,), (a32,), partials)
    (a_hi, a_lo), (w_hi, w_lo) = dt.split_fp32(a32), dt.split_fp32(w32)
    if mode == FP32Mode.LOW:
        return fast.fp32_chain((w_hi,), (a_hi,), partials)
    return fast.fp32_chain((w_hi, w_lo), (a_hi, a_lo), partials)


def sparse_wide_chain(w, a, fmap, fp32_mode=None, partials=False):
    """MatmulSparse with wide products (FP32 operands, or FP32 LUT entries): PE (r, c) fuses
    moving[r, fmap[r, c], :] x w[r, c] into its column's sum with fp32_mode's passes as Matmul does
    (D-10, D-12, D-T24: LOW the hi parts, HIGH (and NONE) the full values, LOW_HIGH four fused adds);
    a row whose fmap is beyond the F sent passes the sum on (D-T26).  Column c is one fmaf chain
    (fastpaths.fp32_chain, D-T76) over its own gathered moving rows: exact for every input.
    w [rows, M], a [rows, F, N] values; returns (psum [M, N] float32, steps [rows, M, N] or None)."""
    rows, fm, n = a.shape
    m = w.shape[1]
    w32, a32 = np.asarray(w, np.float32), np.asarray(a, np.float32)
    if fp32_mode in (FP32Mode.LOW, FP32Mode.LOW_HIGH):
        (w_hi, w_lo), (a_hi, a_lo) = dt.split_fp32(w32), dt.split_fp32(a32)
        ws, as_ = ((w_hi,), (a_hi,)) if fp32_mode == FP32Mode.LOW else ((w_hi, w_lo), (a_hi, a_lo))
    else:
        ws, as_ = (w32,), (a32,)
    psum = np.zeros((m, n), np.float32)
    steps = np.zeros((rows, m, n), np.float32) if partials else None
    for c in range(m):
        rr = np.flatnonzero(fmap[:, c] < fm)                          # rows whose PE takes part
        if not rr.size:
            continue
        col, st = fast.fp32_chain(tuple(x[rr, c:c + 1] for x in ws), tuple(x[rr, fmap[rr, c]] for x in as_),
                                  partials)
        psum[c] = col[0]
        if partials:                                                  # a passing row keeps the sum above it
            last = np.searchsorted(rr, np.arange(rows), side="right") - 1
            steps[last >= 0, c] = st[last[last >= 0], 0]
    return psum, (list(steps) if partials else None)


def _sparse(stationary, moving, tags, in_dtype, st_dtype, gen, e4m3, partials, fp32_mode=None):
    """MatmulSparse: dst[c, n] = sum_r W[r, c] * moving[r, tag[r, c], n] (seed 000 section 9).
    FP32: sparse_wide_chain with fp32_mode (D-12).  Products exact in float32 (as in
    _single_product_chain): fastpaths.sparse_chain; otherwise a float64 add of the one (<= 22-bit)
    product and a cast."""
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
    sig = _SIG_BITS[in_dtype] + _SIG_BITS[st_dtype]
    if sig > 24:
        return _finish(sparse_wide_chain(w, a, tags, fp32_mode, partials), partials)
    (hw, lw), (ha, la) = fast.abs_span(w), fast.abs_span(a)
    if sig <= 24 and np.isfinite(hw) and np.isfinite(ha) and lw * la >= 2.0 ** (sig - 149) and hw * ha < fast.HUGE:
        return _finish(fast.sparse_chain(w, a, tags, partials), partials)
    gathered = widen64(a)[np.arange(k)[:, None], tags, :]                     # [K, M, N]
    psum = np.zeros((stationary.shape[1], n), np.float32)
    steps = []
    for r in range(k):
        with np.errstate(invalid="ignore", over="ignore"):
            psum = (psum + w[r].astype(np.float64)[:, None] * gathered[r]).astype(np.float32)
        if partials:
            steps.append(psum)
    return _finish((psum, steps), partials)


def transpose(moving, in_dtype, gen) -> np.ndarray:
    """D-13: moving[k, n] lands in partition n, element k, bit for bit (8-bit codes zero-extended)."""
    fmt = dt.format_of(in_dtype, gen)
    if fmt.width > 32:
        raise ValueError(f"{Dtype(in_dtype).name} cannot be transposed (8/16/32-bit data only)")
    codes = dt.codes_of(moving, in_dtype, gen, name="moving")
    if codes.ndim != 2:
        raise ValueError(f"moving must be [K, N], got shape {codes.shape}")
    if codes.dtype.kind not in "ui" or (codes.size and (codes.min() < 0 or int(codes.max()) >> fmt.width)):
        raise ValueError(f"moving codes must be {fmt.width}-bit unsigned patterns")
    return codes.astype(np.uint32).T.copy()


def _finish(result, partials: bool):
    """psum (and with `partials` the list of per-row psums) with NaNs canonical (D-10)."""
    psum, steps = result

    def canon(x):
        return canonical_nan(x) if np.isnan(x).any() else x
    if not partials:
        return canon(psum)
    return canon(psum), [canon(s) for s in steps]


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
