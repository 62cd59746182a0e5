"""Independent expectations for the program library: the PE array's column chains (SPEC D-10..D-13,
D-21, docs/numerics.md) in exact integer arithmetic.

Nothing here comes from the golden model's arithmetic (model/array.py, model/mac.py, model/fp.py) or
its decoders (model/dtypes.py): codes decode through ml_dtypes / numpy (E2M5 and INT4 by their
formulas), every finite value is a signed integer significand times a power of two, a row step adds
the psum and the row's products as one int64 sum aligned to the smallest exponent, and one integer
round-to-nearest-even gives the fp32 result.  A sum whose span does not fit 62 bits goes to exact
`Fraction`s.  tests/test_oracle.py checks both paths against Berkeley SoftFloat `f32_mulAdd` chains
and the Fraction chain.  Only the enums (Dtype, Gen, FP32Mode, MXPerfMode) are shared."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import ml_dtypes
import numpy as np

from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa.enums import FP32Mode, MXPerfMode

CANONICAL_NAN = 0x7FC00000
MX_BLOCK = 32                    # contraction elements per E8M0 scale (D-21)
FAST_BITS = 62                   # widest aligned sum the int64 path takes
STATS = {"fast": 0, "fraction": 0}   # elements rounded by each path (tests read it)

_VIEW = {Dtype.BFLOAT16: ml_dtypes.bfloat16, Dtype.FP16: np.float16, Dtype.FP8_EXP3: ml_dtypes.float8_e3m4,
         Dtype.FP8_EXP5: ml_dtypes.float8_e5m2, Dtype.FP4_EXP2: ml_dtypes.float4_e2m1fn}
_PACK = {"double_row": 2, MXPerfMode.QUAD_ROW: 4, MXPerfMode.QUAD_ROW_INTERLEAVE: 4,
         MXPerfMode.QUAD_ROW_TILED: 4, MXPerfMode.OCT_ROW: 8, MXPerfMode.OCT_ROW_INTERLEAVE: 8,
         MXPerfMode.OCT_ROW_TILED: 8}


@dataclass
class Exact:
    """Arrays of values: NaN, or +-Inf (inf = +1 / -1), or (-1)^neg * m * 2^e (m >= 0; m = 0 is a
    zero of sign `neg`)."""
    nan: np.ndarray
    inf: np.ndarray
    neg: np.ndarray
    m: np.ndarray
    e: np.ndarray

    def __getitem__(self, idx):
        return Exact(self.nan[idx], self.inf[idx], self.neg[idx], self.m[idx], self.e[idx])

    @property
    def shape(self):
        return self.m.shape

    def float64(self) -> np.ndarray:
        """The values as float64 (exact for every value this module decodes)."""
        v = np.ldexp(self.m.astype(np.float64), np.clip(self.e, -2000, 2000).astype(np.int32))
        v = np.where(self.inf != 0, np.inf, v)
        v = np.where(self.neg, -v, v)
        return np.where(self.nan, np.nan, v)


def from_f32_bits(bits) -> Exact:
    """binary32 bit patterns by their fields."""
    b = np.asarray(bits, np.uint32).astype(np.int64)
    neg = (b >> 31).astype(bool)
    ex, frac = (b >> 23) & 0xFF, b & 0x7FFFFF
    special = ex == 0xFF
    m = np.where(special, 0, np.where(ex == 0, frac, frac | 0x800000))
    e = np.where(ex == 0, -149, ex - 150)
    inf = np.where(special & (frac == 0), np.where(neg, -1, 1), 0).astype(np.int8)
    return Exact(special & (frac != 0), inf, neg, m, e)


def decode(codes, dtype, gen) -> Exact:
    """Codes (unsigned bit patterns) of a matmul operand format as exact values (SPEC 2, D-02..D-06)."""
    dtype, gen = Dtype.parse(dtype), Gen.parse(gen)
    c = np.asarray(codes).astype(np.int64)
    if dtype == Dtype.FP32:
        return from_f32_bits(c.astype(np.uint32))
    if dtype == Dtype.FP8_EXP2:                    # E2M5, bias 1, all finite (D-04)
        ex, frac = (c >> 5) & 3, c & 31
        m = np.where(ex == 0, frac, frac | 32)
        e = np.where(ex == 0, 0, ex - 1) - 5
        z = np.zeros(c.shape, np.int8)
        return Exact(z.astype(bool), z, (c >> 7).astype(bool), m, e)
    if dtype == Dtype.INT4:                        # two's complement nibble (D-06)
        v = np.where((c & 0xF) >= 8, (c & 0xF) - 16, c & 0xF)
        z = np.zeros(c.shape, np.int8)
        return Exact(z.astype(bool), z, v < 0, np.abs(v), np.zeros(c.shape, np.int64))
    if dtype == Dtype.FP8_EXP4:                    # IEEE-style before MARIANA, OCP E4M3FN after (D-02)
        view = ml_dtypes.float8_e4m3 if gen < Gen.MARIANA else ml_dtypes.float8_e4m3fn
    elif dtype in _VIEW:
        view = _VIEW[dtype]
    else:
        raise ValueError(f"{dtype.name} is not a matmul operand format")
    width = np.dtype(view).itemsize
    raw = c.astype({1: np.uint8, 2: np.uint16}[width]).view(view)
    return from_f32_bits(raw.astype(np.float32).view(np.uint32))


def _bitlen(m):
    """Exact bit length of int64 values >= 0 (0 for 0)."""
    m = np.asarray(m, np.int64)
    _, e = np.frexp(m.astype(np.float64))       # the float may round up to the next power of two
    e = e.astype(np.int64)
    over = (e > 0) & (m < np.left_shift(np.int64(1), np.clip(e - 1, 0, 62)))
    return np.where(m == 0, 0, e - over)


def _strip(m, e):
    """m * 2^e with m odd (zeros stay 0)."""
    low = m & -m
    _, tz = np.frexp(np.where(m == 0, 1, low).astype(np.float64))
    tz = tz.astype(np.int64) - 1
    return m >> tz, e + tz


def product(w: Exact, a: Exact, scale_exp=None) -> Exact:
    """w * a exactly (broadcasting), times 2^scale_exp (NaN where scale_exp is NaN)."""
    nan = w.nan | a.nan | ((w.inf != 0) & (a.m == 0) & (a.inf == 0) & ~a.nan) | \
        ((a.inf != 0) & (w.m == 0) & (w.inf == 0) & ~w.nan)
    neg = w.neg ^ a.neg
    any_inf = (w.inf != 0) | (a.inf != 0)
    m, e = w.m * a.m, w.e + a.e
    if scale_exp is not None:
        s = np.asarray(scale_exp, np.float64)
        nan = nan | np.isnan(s)
        e = e + np.where(np.isnan(s), 0, s).astype(np.int64)
    nan = np.broadcast_to(nan, m.shape)
    inf = np.where(any_inf & ~nan, np.where(neg, -1, 1), 0).astype(np.int8)
    m = np.where(any_inf | nan, 0, m)
    return Exact(nan, inf, np.broadcast_to(neg, m.shape), m, np.broadcast_to(e, m.shape))


def _round(neg, a, emin):
    """binary32 bits of (-1)^neg * a * 2^emin (a > 0, int64), rounded to nearest even."""
    bl = _bitlen(a)
    top = bl - 1 + emin
    q = np.where(top < -126, -149, top - 23)          # exponent of the result's last significand bit
    shift = q - emin
    exact = a << np.clip(-shift, 0, 62)
    sh = np.clip(shift, 1, 62)
    r = a >> sh
    rem = a & ((np.int64(1) << sh) - 1)
    half = np.int64(1) << (sh - 1)
    r = r + ((rem > half) | ((rem == half) & ((r & 1) == 1)))
    r = np.where(shift <= 0, exact, np.where(shift > bl, 0, r))
    carry = r == 1 << 24
    r, q = np.where(carry, 1 << 23, r), q + carry
    biased = np.where(r >= 1 << 23, q + 150, 0)
    bits = np.where(biased >= 255, 0x7F800000, (biased << 23) | (r & 0x7FFFFF))
    return (bits | (neg.astype(np.int64) << 31)).astype(np.uint32)


def _fraction_round(x: Fraction) -> int:
    """binary32 bits of the exact nonzero rational x, RNE (the Fraction path)."""
    return int(np.float32(rne_fp32(x)).view(np.uint32))


def fused_step(p: Exact, terms: list) -> np.ndarray:
    """RNE_fp32(p + sum(terms)), the terms summed exactly first (D-10, D-11): binary32 bits,
    canonical NaN."""
    shape = p.shape
    adds = [p] + list(terms)
    nan = np.zeros(shape, bool)
    pos, negi = np.zeros(shape, bool), np.zeros(shape, bool)
    for x in adds:
        nan |= x.nan
        pos |= x.inf > 0
        negi |= x.inf < 0
    nan |= pos & negi
    # finite: strip, find the span
    parts = [_strip(x.m, x.e) for x in adds]
    big = np.int64(1) << 40
    emin = np.full(shape, big)
    top = np.full(shape, -big)
    nonzero = np.zeros(shape, bool)
    all_neg_zero = np.ones(shape, bool)
    for x, (m, e) in zip(adds, parts):
        nz = m != 0
        nonzero |= nz
        all_neg_zero &= (m == 0) & x.neg
        emin = np.where(nz, np.minimum(emin, e), emin)
        top = np.maximum(top, np.where(nz, _bitlen(m) + e, -big))
    fits = (top - emin + len(adds).bit_length()) <= FAST_BITS
    fast = fits & nonzero & ~nan & ~pos & ~negi
    total = np.zeros(shape, np.int64)
    for x, (m, e) in zip(adds, parts):
        sh = np.where(fast & (m != 0), e - emin, 0)
        v = np.where(fast, m, 0) << np.clip(sh, 0, 62)
        total += np.where(x.neg, -v, v)
    out = np.where(all_neg_zero, np.uint32(0x80000000), np.uint32(0))
    rounded = fast & (total != 0)
    if rounded.any():
        out = np.where(rounded, _round(total < 0, np.where(rounded, np.abs(total), 1), np.where(rounded, emin, 0)), out)
    slow = nonzero & ~fits & ~nan & ~pos & ~negi
    STATS["fast"] += int(fast.sum())
    STATS["fraction"] += int(slow.sum())
    for idx in zip(*np.nonzero(slow)):
        x = sum((Fraction(int(m[idx])) * Fraction(2) ** int(e[idx]) * (-1 if a.neg[idx] else 1)
                 for a, (m, e) in zip(adds, parts)), Fraction(0))
        out[idx] = 0 if x == 0 else _fraction_round(x)
    out = np.where(pos & ~nan, np.uint32(0x7F800000), out)
    out = np.where(negi & ~nan, np.uint32(0xFF800000), out)
    return np.where(nan, np.uint32(CANONICAL_NAN), out).astype(np.uint32)


def _f32(bits) -> np.ndarray:
    return np.asarray(bits, np.uint32).view(np.float32)


def chain(w: Exact, a: Exact, scales=None) -> np.ndarray:
    """Column chains: w [rows, pack, M], a [rows, pack, N]; scales None or (sw [rows, M], sa [rows, N])
    exponents (NaN for a NaN scale).  Returns float32 [M, N]."""
    rows, pack, m = w.shape
    n = a.shape[2]
    bits = np.zeros((m, n), np.uint32)
    for r in range(rows):
        se = None if scales is None else scales[0][r][:, None] + scales[1][r][None, :]
        terms = [product(w[r, j][:, None], a[r, j][None, :], se) for j in range(pack)]
        bits = fused_step(from_f32_bits(bits), terms)
    return _f32(bits)


def split_fp32(x: Exact, bits) -> tuple:
    """fp32_mode operands (D-12): hi = the pattern with its low 10 mantissa bits cleared, lo = x - hi
    (IEEE subtraction: an exact zero difference is +0; +0 for Inf / NaN)."""
    hi = from_f32_bits(np.asarray(bits, np.uint32) & np.uint32(0xFFFFFC00))
    finite = ~x.nan & (x.inf == 0)
    m = np.where(finite, x.m & 0x3FF, 0)
    lo = Exact(np.zeros(x.shape, bool), np.zeros(x.shape, np.int8), x.neg & (m != 0), m, x.e)
    return hi, lo


def fp32_pairs(w_bits, a_bits, mode) -> list:
    """The (stationary, moving) operand pairs each PE fuses in turn for an FP32 matmul (D-12,
    D-T24): HIGH the values, LOW the hi parts, LOW_HIGH moving hi*hi, hi*lo, lo*hi, lo*lo."""
    w, a = from_f32_bits(w_bits), from_f32_bits(a_bits)
    if mode == FP32Mode.HIGH:
        return [(w, a)]
    (w_hi, w_lo), (a_hi, a_lo) = split_fp32(w, w_bits), split_fp32(a, a_bits)
    return [(w_hi, a_hi)] if mode == FP32Mode.LOW else [(w_hi, a_hi), (w_lo, a_hi), (w_hi, a_lo), (w_lo, a_lo)]


def _fp32_chain(w_bits, a_bits, mode) -> np.ndarray:
    pairs = fp32_pairs(w_bits, a_bits, mode)
    k, m = pairs[0][0].shape
    bits = np.zeros((m, pairs[0][1].shape[1]), np.uint32)
    for r in range(k):
        for pw, pa in pairs:
            bits = fused_step(from_f32_bits(bits), [product(pw[r][:, None], pa[r][None, :])])
    return _f32(bits)


def _sparse_chain(pairs: list, tags) -> np.ndarray:
    """MatmulSparse: PE (r, c) fuses w[r, c] * moving[r, tag, n] for each (w [K, M], moving
    [K, F, N]) pair in turn (one pair, or fp32_pairs for FP32); a tag beyond the fmaps sent
    contributes nothing (seed 000 section 9, D-T26)."""
    k, f, n = pairs[0][1].shape
    m = pairs[0][0].shape[1]
    bits = np.zeros((m, n), np.uint32)
    for r in range(k):
        t = np.asarray(tags[r])
        new = bits
        for w, a in pairs:
            g = a[r][np.clip(t, 0, f - 1)]                           # [M, N]
            new = fused_step(from_f32_bits(new), [product(w[r][:, None], g)])
        bits = np.where((t < f)[:, None], new, bits)
    return _f32(bits)


def _scale_exps(codes):
    s = np.asarray(codes).astype(np.int64)
    return np.where(s == 0xFF, np.nan, s - 127.0)


_MEMO: dict = {}
_MEMO_ELEMENTS = 1 << 16         # results of at most this many elements are remembered


def matmul(stationary, moving, *, in_dtype, gen, fp32_mode=None, perf_mode=None,
           stationary_scales=None, moving_scales=None, tags=None) -> np.ndarray:
    """dst[M, N] float32 = stationary[K, M].T @ moving[K, N] in the PE's arithmetic (the arguments of
    model.array.matmul; FP32 needs fp32_mode, a MatmulSparse too or it fuses the exact products;
    perf_mode "double_row" or an MX mode with E8M0 scale codes [K/32, M] and [K/32, N]; tags [K, M]
    with moving [K, F, N] for MatmulSparse).  Small results are remembered: the tests build the same
    library programs many times."""
    args = [np.asarray(x) for x in (stationary, moving, stationary_scales, moving_scales, tags)]
    key = (tuple((x.shape, x.dtype.str, x.tobytes()) for x in args),
           str(in_dtype), str(gen), str(fp32_mode), str(perf_mode))
    if key not in _MEMO:
        result = _matmul(stationary, moving, in_dtype=in_dtype, gen=gen, fp32_mode=fp32_mode, perf_mode=perf_mode,
                         stationary_scales=stationary_scales, moving_scales=moving_scales, tags=tags)
        if result.size > _MEMO_ELEMENTS:
            return result
        if len(_MEMO) > 4096:
            _MEMO.clear()
        _MEMO[key] = result
    return _MEMO[key].copy()


def _matmul(stationary, moving, *, in_dtype, gen, fp32_mode, perf_mode, stationary_scales, moving_scales, tags):
    gen, dtype = Gen.parse(gen), Dtype.parse(in_dtype)
    st, mv = np.asarray(stationary), np.asarray(moving)
    mode = None if fp32_mode is None else \
        FP32Mode[fp32_mode.upper()] if isinstance(fp32_mode, str) else FP32Mode(fp32_mode)
    if tags is not None:
        wide = dtype == Dtype.FP32 and mode not in (None, FP32Mode.NONE)
        pairs = fp32_pairs(st.astype(np.uint32), mv.astype(np.uint32), mode) if wide else \
            [(decode(st, dtype, gen), decode(mv, dtype, gen))]
        return _sparse_chain(pairs, tags)
    if dtype == Dtype.FP32:
        if mode in (None, FP32Mode.NONE):
            raise ValueError("FP32 needs fp32_mode LOW, HIGH or LOW_HIGH (D-12)")
        return _fp32_chain(st.astype(np.uint32), mv.astype(np.uint32), mode)
    perf = perf_mode
    if isinstance(perf, str) and perf.lower() != "double_row":
        perf = MXPerfMode[perf.upper()]
    elif isinstance(perf, str):
        perf = "double_row"
    pack = _PACK.get(perf, 1)
    if st.ndim != 2 or mv.ndim != 2 or st.shape[0] != mv.shape[0] or st.shape[0] % pack:
        raise ValueError(f"stationary [K, M] and moving [K, N] with K a multiple of {pack}; got {st.shape}, {mv.shape}")
    k, m = st.shape
    rows = k // pack
    w = decode(st, dtype, gen)[np.arange(rows * pack).reshape(rows, pack)]        # [rows, pack, M]
    a = decode(mv, dtype, gen)[np.arange(rows * pack).reshape(rows, pack)]
    scales = None
    if isinstance(perf, MXPerfMode):
        if k % MX_BLOCK:
            raise ValueError(f"MX needs K to be a multiple of {MX_BLOCK}, got {k}")
        block = (np.arange(rows) * pack) // MX_BLOCK
        scales = (_scale_exps(stationary_scales)[block], _scale_exps(moving_scales)[block])
    return chain(w, a, scales)


def add_f32(old, value) -> np.ndarray:
    """PSUM accumulate: RNE_fp32(old + value) of float32 arrays, canonical NaN (D-10, D-18)."""
    o = np.asarray(old, np.float32).view(np.uint32)
    v = np.asarray(value, np.float32).view(np.uint32)
    return _f32(fused_step(from_f32_bits(o), [from_f32_bits(v)]))


def rne_fp32(x: Fraction) -> float:
    """Round an exact rational to binary32 with ties-to-even, subnormals, overflow to Inf."""
    if x == 0:
        return 0.0
    sign = -1.0 if x < 0 else 1.0
    x = abs(x)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    if Fraction(2) ** (e + 1) <= x:
        e += 1
    q = Fraction(2) ** (max(e, -126) - 23)
    n, r = divmod(x, q)
    if r > q / 2 or (r == q / 2 and n % 2):
        n += 1
    v = n * q
    if v >= Fraction(2) ** 128:
        return sign * float("inf")
    return sign * float(v)
