"""The PE array, functional level: dst = stationary.T @ moving, bit-exact (SPEC D-10..D-13, D-21).

Each column c runs a chain down the active rows: psum starts at +0 in the first row and every row
fuses its product(s) into it with one round to nearest even (D-10); multi-term steps sum exactly
first (D-11).  No np.matmul: the chain order is the hardware's, so the bits are the hardware's.
Codes go in (unsigned bit patterns of `in_dtype`), float32 comes out; a transposing matmul returns
the moved bit patterns (uint32)."""
from __future__ import annotations

import numpy as np
from scipy.linalg import blas as _blas

from model import dtypes as dt
from model.dtypes import Dtype, Gen
from model.isa.enums import FP32Mode, MXPerfMode
from model.mac import canonical_nan, fused_sum

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
            if partials:
                steps.append(np.ascontiguousarray(psum))
        psum = np.ascontiguousarray(psum)
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
    else:
        for r in range(k):
            with np.errstate(invalid="ignore"):
                psum = fused_sum(psum, [np.multiply.outer(w[r], a[r])])
            if partials:
                steps.append(psum)
    return psum, steps


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
    gathered = a[np.arange(k)[:, None], tags, :]                     # [K, M, N]
    psum = np.zeros((stationary.shape[1], n), np.float32)
    steps = []
    for r in range(k):
        with np.errstate(invalid="ignore", over="ignore"):
            psum = (psum + w[r][:, None] * gathered[r]).astype(np.float32)   # <= 22-bit products
        if partials:
            steps.append(psum)
    return _finish((psum, steps) if partials else psum)


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
    from model.isa.check import matmul_input_dtypes
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
