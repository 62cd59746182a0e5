"""model.dtypes against things we did not write: ml_dtypes, numpy, exact Fractions, the seed text."""
import re
from fractions import Fraction

import ml_dtypes as md
import numpy as np
import pytest

from tensore.model import dtypes as dt
from tensore.model.dtypes import Dtype, Gen

SEED = 20261130
ALL_GENS = list(Gen)

# (dtype, generation, ml_dtypes / numpy twin) for every format that has one (D-02, D-03, D-05).
TWINS = [
    (Dtype.BFLOAT16, Gen.CAYMAN, md.bfloat16),
    (Dtype.FP16, Gen.CAYMAN, np.float16),
    (Dtype.FP8_EXP3, Gen.CAYMAN, md.float8_e3m4),
    (Dtype.FP8_EXP4, Gen.SUNDA, md.float8_e4m3),
    (Dtype.FP8_EXP4, Gen.CAYMAN, md.float8_e4m3),
    (Dtype.FP8_EXP4, Gen.MARIANA, md.float8_e4m3fn),
    (Dtype.FP8_EXP4, Gen.MAVERICK, md.float8_e4m3fn),
    (Dtype.FP8_EXP5, Gen.MAVERICK, md.float8_e5m2),
    (Dtype.FP4_EXP2, Gen.MARIANA, md.float4_e2m1fn),
    (Dtype.SFP8_E8, Gen.MAVERICK, md.float8_e8m0fnu),
]
TWIN_IDS = [f"{d.name}-{g.name}" for d, g, _ in TWINS]
# A RuntimeWarning out of the model (an invalid cast, an overflow) is a fault a user sees.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def twin_codes(x: np.ndarray, twin) -> np.ndarray:
    """np.float32 -> twin conversion, as unsigned codes."""
    y = x.astype(twin)
    width = np.dtype(twin).itemsize
    codes = y.view(np.uint8 if width == 1 else np.uint16)
    return codes & 0xF if twin is md.float4_e2m1fn else codes


def twin_values(fmt, twin) -> np.ndarray:
    """Every code of `fmt` (0 .. 2^bits - 1) read as the twin type."""
    width = np.dtype(twin).itemsize
    return np.arange(1 << fmt.bits).astype(np.uint8 if width == 1 else np.uint16).view(twin)


def special_fp32() -> np.ndarray:
    """Signed zeros, subnormals, extremes, Inf, NaN payloads, and every power of two +- a little."""
    bits = [0, 1, 2, 0x3FFFFF, 0x400000, 0x7FFFFF, 0x800000, 0x7F7FFFFF, 0x7F800000, 0x7F800001,
            0x7FC00000, 0x7FFFFFFF, 0x7FA00000, 0x7F801000, 0x3F800000, 0x3F800001, 0x3FFFFFFF]
    out = np.array(bits, np.uint32)
    pw = (np.arange(1, 255, dtype=np.uint32) << 23)
    out = np.concatenate([out, pw, pw - 1, pw + 1, pw | 0x400000, pw | 0x3FFFFF, pw | 0x400001])
    return np.concatenate([out, out | 0x80000000]).view(np.float32)


def ties_for(fmt: dt.FloatFormat) -> np.ndarray:
    """Exact midpoints between adjacent finite codes, and one fp32 ulp either side."""
    n = fmt.max_code + 1
    codes = np.arange(n, dtype=np.uint64)
    dec = dt._decode_table(fmt)[codes.astype(np.intp)].view(np.float32).astype(np.float64)
    mids = ((dec[:-1] + dec[1:]) / 2).astype(np.float32)
    assert np.all(mids.astype(np.float64) == (dec[:-1] + dec[1:]) / 2), "midpoint not fp32-exact"
    mb = mids.view(np.uint32)
    with np.errstate(over="ignore"):
        top = (dec[-1:] * 1.0625).astype(np.float32).view(np.uint32)
    out = np.concatenate([mb, mb + 1, mb - 1, top])
    return np.concatenate([out, out | 0x80000000]).view(np.float32)


# --- decode ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,gen,twin", TWINS, ids=TWIN_IDS)
def test_decode_every_code_like_ml_dtypes(dtype, gen, twin):
    fmt = dt.format_of(dtype, gen)
    ref = twin_values(fmt, twin).astype(np.float32)
    got = dt.to_fp32(np.arange(1 << fmt.bits, dtype=np.uint64), dtype, gen)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))


@pytest.mark.parametrize("dtype,gen,twin", TWINS, ids=TWIN_IDS)
def test_value_of_code_like_ml_dtypes(dtype, gen, twin):
    """FloatFormat.value_of_code (the narrowing tests' exact values) for every code, signed ones
    too: the twin's value as a Fraction, +-inf as floats, None for NaN."""
    fmt = dt.format_of(dtype, gen)
    with np.errstate(invalid="ignore"):                 # the twin's signalling NaNs
        values = twin_values(fmt, twin).astype(np.float64).tolist()
    for code, r in enumerate(values):
        got = fmt.value_of_code(code)
        assert (got is None) if r != r else (got == r and (isinstance(got, Fraction) or abs(r) == float("inf"))), \
            (dtype.name, gen.name, code, got, r)


@pytest.mark.parametrize("dtype", [Dtype.FP8_EXP2, Dtype.SFP8_E8, Dtype.SFP8_E7, Dtype.SFP8_E6,
                                   Dtype.SFP8_E5], ids=lambda d: d.name)
def test_decode_against_fractions(dtype):
    """E2M5 (D-04) and the SFP8 scales (D-05) over all 256 codes, from their definitions."""
    e_bits, m_bits, signed = {Dtype.FP8_EXP2: (2, 5, True), Dtype.SFP8_E8: (8, 0, False),
                              Dtype.SFP8_E7: (7, 1, False), Dtype.SFP8_E6: (6, 2, False),
                              Dtype.SFP8_E5: (5, 3, False)}[dtype]
    bias = (1 << (e_bits - 1)) - 1
    got = dt.to_fp32(np.arange(256, dtype=np.uint16), dtype, Gen.MAVERICK)
    for code in range(256):
        if signed:
            s, e, m = code >> 7, (code >> 5) & 3, code & 31
            mag = Fraction(m, 32) * 2 ** (1 - bias) if e == 0 else (1 + Fraction(m, 32)) * Fraction(2) ** (e - bias)
            expect = -mag if s else mag
        else:
            if code == 255:
                assert np.isnan(got[code])
                continue
            e, m = code >> m_bits, code & ((1 << m_bits) - 1)
            expect = (1 + Fraction(m, 1 << m_bits)) * Fraction(2) ** (e - bias)
        assert Fraction(float(got[code])) == expect, (dtype.name, code)
        if signed and code == 0x80:
            assert np.signbit(got[code])
    if dtype == Dtype.FP8_EXP2:
        assert float(got[0x7F]) == 7.875 and float(got[1]) == 2.0 ** -5
        assert not np.isnan(got).any() and not np.isinf(got).any()


def test_int_and_int4_decode():
    g = Gen.MAVERICK
    assert dt.to_fp32([0xFF, 0x80, 0x7F], Dtype.INT8, g).tolist() == [-1, -128, 127]
    assert dt.to_fp32([0xFF], Dtype.UINT8, g).tolist() == [255]
    assert dt.to_fp32([0xFFFF, 0x8000], Dtype.INT16, g).tolist() == [-1, -32768]
    assert dt.to_fp32(np.arange(16, dtype=np.uint8), Dtype.INT4, g).tolist() == \
        [0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1]
    # 32/64-bit integers round to nearest even exactly once (no double rounding through float64).
    rng = np.random.default_rng(SEED)
    for dtype, bits, signed in [(Dtype.INT32, 32, True), (Dtype.UINT32, 32, False),
                                (Dtype.INT64, 64, True), (Dtype.UINT64, 64, False)]:
        codes = rng.integers(0, 2 ** 63, 4000, dtype=np.uint64) >> rng.integers(0, 63, 4000).astype(np.uint64)
        codes = np.concatenate([codes, codes | np.uint64(1 << 63)]) & np.uint64((1 << bits) - 1)
        # ties at 2^53+: 2^60 + 2^36 + 1 (just above a tie) and exact ties
        # and 2^53 + 2^29 + 1, which float64 rounds to a tie (2^53 + 2^29); negated for the signed
        extra = np.array([(1 << 60) + (1 << 36), (1 << 60) + (1 << 36) + 1, (1 << 60) + (3 << 36),
                          (1 << 53) + (1 << 29) + 1, (1 << 25) + 1, (1 << 25) + 2, (1 << 25) + 3,
                          2 ** 64 - 1], dtype=np.uint64)
        extra = np.concatenate([extra, -extra if signed else extra[:0]])
        codes = np.concatenate([codes, extra & np.uint64((1 << bits) - 1)])
        got = dt.to_fp32(codes, dtype, g)
        for c, v in zip(codes.tolist(), got.tolist()):
            ival = c - (1 << bits) if signed and c >> (bits - 1) else c
            assert v == float(_ref_round_fp32(Fraction(ival))), (dtype.name, hex(c))


def _ref_round_fp32(x: Fraction) -> Fraction:
    """Round a Fraction to float32 with RNE (normal range only, enough for integers)."""
    if x == 0:
        return Fraction(0)
    sign, x = (-1 if x < 0 else 1), abs(x)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** e > x:
        e -= 1
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    q = Fraction(2) ** (e - 23)
    n, r = divmod(x, q)
    if r > q / 2 or (r == q / 2 and n % 2):
        n += 1
    return sign * n * q


# --- narrowing ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,gen,twin", TWINS, ids=TWIN_IDS)
def test_narrow_special_values_like_ml_dtypes(dtype, gen, twin):
    fmt = dt.format_of(dtype, gen)
    x = np.concatenate([special_fp32(), ties_for(fmt)])
    with np.errstate(all="ignore"):
        ref = twin_codes(x, twin)
    np.testing.assert_array_equal(dt.from_fp32(x, dtype, gen), ref)


@pytest.mark.slow
@pytest.mark.parametrize("dtype,gen,twin", TWINS, ids=TWIN_IDS)
def test_narrow_random_patterns_like_ml_dtypes(dtype, gen, twin):
    """10^6 random fp32 bit patterns, plus 10^6 drawn near the format's range, per format."""
    rng = np.random.default_rng(SEED + int(dtype))
    fmt = dt.format_of(dtype, gen)
    bits = rng.integers(0, 2 ** 32, 1_000_000, dtype=np.uint64).astype(np.uint32)
    lo, hi = fmt.emin - fmt.man_bits - 3, 2 ** (fmt.exp_bits - 1) + 2
    exps = rng.integers(max(lo, -149), min(hi, 127), 1_000_000)
    near = np.ldexp(rng.random(1_000_000) + 1.0, exps).astype(np.float32) * rng.choice([-1, 1], 1_000_000)
    x = np.concatenate([bits.view(np.float32), near.astype(np.float32)])
    with np.errstate(all="ignore"):
        ref = twin_codes(x, twin)
    got = dt.from_fp32(x, dtype, gen)
    bad = np.nonzero(got != ref)[0]
    assert bad.size == 0, [(hex(x.view(np.uint32)[i]), hex(got[i]), hex(ref[i])) for i in bad[:5]]


def _ref_narrow(x: float, fmt: dt.FloatFormat, vals: list) -> int:
    """Reference narrowing: nearest finite code by Fractions, ties to the even code (finite x)."""
    import bisect
    target = Fraction(x)
    neg = target < 0 or (target == 0 and bool(np.signbit(x)))
    if not fmt.signed and target <= 0:
        return fmt.nan_code
    mag = abs(target)
    i = bisect.bisect_left(vals, mag)
    if i == len(vals):                                   # beyond max: compare with half a step up
        step = vals[-1] - vals[-2] if fmt.man_bits else vals[-1]
        limit = vals[-1] + step / 2
        if mag > limit or (mag == limit and fmt.max_code & 1):
            over = {"saturate": fmt.max_code, "inf": fmt.inf_code, "nan": fmt.nan_code}[fmt.overflow]
            return over | (fmt.sign_bit if neg else 0)
        best = fmt.max_code
    elif vals[i] == mag or i == 0:
        best = i
    else:
        lo, hi = vals[i - 1], vals[i]
        best = i - 1 if (mag - lo < hi - mag or (mag - lo == hi - mag and (i - 1) % 2 == 0)) else i
    return best | (fmt.sign_bit if (neg and fmt.signed) else 0)


@pytest.mark.parametrize("dtype", [Dtype.FP8_EXP2, Dtype.SFP8_E7, Dtype.SFP8_E6, Dtype.SFP8_E5],
                         ids=lambda d: d.name)
def test_narrow_against_fractions(dtype):
    """Formats without an ml_dtypes twin: every midpoint, +-1 ulp, and random values."""
    fmt = dt.format_of(dtype, Gen.MAVERICK)
    rng = np.random.default_rng(SEED)
    dec = dt.to_fp32(np.arange(fmt.max_code + 1, dtype=np.uint16), dtype, Gen.MAVERICK).astype(np.float64)
    mids = ((dec[:-1] + dec[1:]) / 2).astype(np.float32)
    x = np.concatenate([mids, np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(0)),
                        dec.astype(np.float32), dec.astype(np.float32) * np.float32(1.3),
                        np.ldexp(rng.random(3000) + 0.5, rng.integers(-20, 12, 3000)).astype(np.float32),
                        np.array([1e30, 7.9, 7.875, 8.0, 1e-30], np.float32)])
    if fmt.signed:
        x = np.concatenate([x, -x])
    got = dt.from_fp32(x, dtype, Gen.MAVERICK)
    vals = [fmt.value_of_code(c) for c in range(fmt.max_code + 1)]
    for v, g in zip(x.tolist(), got.tolist()):
        if not fmt.signed and 0 < v < float(vals[0]):
            assert g == 0, (dtype.name, v)     # below the smallest scale: clamps to code 0 (D-T03)
            continue
        assert g == _ref_narrow(v, fmt, vals), (dtype.name, v, hex(g))


def test_e2m5_saturates_and_nan_to_zero():
    x = np.array([np.inf, -np.inf, 1e9, -8.0, np.nan, -np.nan], np.float32)
    assert dt.from_fp32(x, Dtype.FP8_EXP2, Gen.MAVERICK).tolist() == [0x7F, 0xFF, 0x7F, 0xFF, 0, 0]


def test_scale_policy():
    """SFP8 scales: zero, negatives, Inf, NaN have no code but NaN; overflow is NaN (D-05, D-T03)."""
    for dtype in (Dtype.SFP8_E8, Dtype.SFP8_E7, Dtype.SFP8_E6, Dtype.SFP8_E5):
        x = np.array([0.0, -1.0, np.inf, np.nan, 3e38], np.float32)
        assert dt.from_fp32(x, dtype, Gen.MAVERICK).tolist() == [255] * 5


def test_fp32r_is_rne_to_13_bits():
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal(20000).astype(np.float32)
    codes = dt.from_fp32(x, Dtype.FP32R, Gen.CAYMAN)
    assert codes.dtype == np.uint32 and not np.any(codes & 0x3FF)
    back = dt.to_fp32(codes, Dtype.FP32R, Gen.CAYMAN)
    for v, b in zip(x[:2000].tolist(), back[:2000].tolist()):
        q = Fraction(2) ** (int(np.frexp(v)[1]) - 1 - 13)
        n, r = divmod(Fraction(v), q)
        n += 1 if (r > q / 2 or (r == q / 2 and n % 2)) else 0
        assert Fraction(b) == n * q
    special = np.array([np.inf, -np.inf, np.nan, 3.4028235e38], np.float32)
    assert [hex(c) for c in dt.from_fp32(special, Dtype.FP32R, Gen.CAYMAN)] == \
        ["0x7f800000", "0xff800000", "0x7fc00000", "0x7f800000"]
    assert [hex(c) for c in dt.from_fp32(special, Dtype.FP32R, Gen.CAYMAN, saturate=True)] == \
        ["0x7f7ffc00", "0xff7ffc00", "0x7fc00000", "0x7f7ffc00"]


def test_fp32r_rounds_fp32_subnormals_to_its_own():
    """An fp32 subnormal f * 2^-149 narrows to FP32R's subnormal n * 2^-139, n = f / 2^10 rounded to
    nearest even (Fractions), ties and the carry into the smallest normal included."""
    rng = np.random.default_rng(SEED)
    f = np.concatenate([rng.integers(1, 1 << 23, 3000), [1 << 9, 3 << 9, 5 << 9, (1 << 23) - 1, 1]])
    bits = np.concatenate([f, f | (1 << 31)]).astype(np.uint32)
    back = dt.to_fp32(dt.from_fp32(bits.view(np.float32), Dtype.FP32R, Gen.CAYMAN), Dtype.FP32R, Gen.CAYMAN)
    for b, v in zip(bits.tolist(), back.tolist()):
        n, r = divmod(b & 0x7FFFFF, 1 << 10)
        n += 1 if (r > 1 << 9 or (r == 1 << 9 and n % 2)) else 0
        assert Fraction(v) == (-1 if b >> 31 else 1) * n * Fraction(2) ** -139, hex(b)


def test_saturate_option():
    x = np.array([1e6, -np.inf, np.nan], np.float32)
    assert dt.from_fp32(x, Dtype.FP8_EXP4, Gen.MAVERICK, saturate=True).tolist() == [0x7E, 0xFE, 0x7F]
    assert dt.from_fp32(x, Dtype.FP8_EXP5, Gen.MAVERICK, saturate=True).tolist() == [0x7B, 0xFB, 0x7E]
    assert dt.from_fp32(x, Dtype.BFLOAT16, Gen.MAVERICK, saturate=True).tolist() == [0x4974, 0xFF7F, 0x7FC0]
    # FP32 keeps every finite value and NaN; only +-Inf becomes +-max (0x7F7FFFFF)
    assert [hex(c) for c in dt.from_fp32(x, Dtype.FP32, Gen.MAVERICK, saturate=True)] == \
        ["0x49742400", "0xff7fffff", "0x7fc00000"]
    nan_inf = np.array([0x7F800000, 0x7F800001, 0xFF800001, 0xFF800000], np.uint32).view(np.float32)
    assert [hex(c) for c in dt.from_fp32(nan_inf, Dtype.FP32, Gen.MAVERICK, saturate=True)] == \
        ["0x7f7fffff", "0x7f800001", "0xff800001", "0xff7fffff"]


def test_sr_saturate_clamps_what_rounds_to_inf():
    """rounding='sr' with saturate: +-Inf, and a finite value SR rounds up past bf16's max, become
    +-max (0x7F7F / 0xFF7F); NaN stays NaN; the rest as without saturate."""
    u = np.array([0x7F800000, 0xFF800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7FC00000, 0xFFC00000, 0x3F808000], np.uint32)
    rand = np.full(u.size, 0xFFFF, np.uint16)
    got = dt.from_fp32(u.view(np.float32), Dtype.BFLOAT16, Gen.MARIANA, rounding="sr", rand=rand, saturate=True)
    assert got.dtype == np.uint16
    assert [hex(c) for c in got] == ["0x7f7f", "0xff7f", "0x7f7f", "0xff7f", "0x7fc0", "0xffc0", "0x3f81"]


def test_from_fp32_takes_numpy_numbers_only():
    """float64 and integer inputs narrow like their float32 values; bool and complex raise TypeError."""
    g = Gen.MAVERICK
    x = [1.0, -2.5, 3.0e38, 2.0 ** -130]
    want = dt.from_fp32(np.array(x, np.float32), Dtype.BFLOAT16, g).tolist()
    assert dt.from_fp32(np.array(x, np.float64), Dtype.BFLOAT16, g).tolist() == want
    assert dt.from_fp32(np.array([3, -7], np.int64), Dtype.FP16, g).tolist() == [0x4200, 0xC700]
    assert dt.from_fp32(np.array([3, 7], np.uint8), Dtype.FP16, g).tolist() == [0x4200, 0x4700]
    for bad in (np.array([True]), np.array([1 + 1j])):
        with pytest.raises(TypeError, match="takes float32 values"):
            dt.from_fp32(bad, Dtype.BFLOAT16, g)


def test_e8m0_reads_fp32_subnormals_like_ml_dtypes():
    """SFP8_E8 (ml_dtypes float8_e8m0fnu): an fp32 subnormal is code 1 above 2^-127 (frac 0x400000),
    else 0; the normals of the lowest exponents round as the other values do."""
    frac = np.array([1, 0x3FFFFF, 0x400000, 0x400001, 0x7FFFFF], np.uint32)
    bits = np.concatenate([frac, frac | (1 << 23), frac | (2 << 23)])
    x = bits.view(np.float32)
    assert dt.from_fp32(x, Dtype.SFP8_E8, Gen.MAVERICK).tolist() == twin_codes(x, md.float8_e8m0fnu).tolist()


def test_codes_of_twins_and_values():
    """codes_of: a bfloat16 / float16 array gives its bit patterns in 16-bit codes (seed text:
    1.0 = 0x3F80 / 0x3C00, -2.5 = 0xC020 / 0xC100, +Inf = 0x7F80 / 0x7C00); float64 values that are
    bf16 values give the same codes; a value that is not raises."""
    g = Gen.MAVERICK
    x = [1.0, -2.5, 0.0, np.inf]
    bf = dt.codes_of(np.array(x, md.bfloat16), Dtype.BFLOAT16, g)
    assert bf.dtype == np.uint16 and [hex(c) for c in bf] == ["0x3f80", "0xc020", "0x0", "0x7f80"]
    h = dt.codes_of(np.array(x, np.float16), Dtype.FP16, g)
    assert h.dtype == np.uint16 and [hex(c) for c in h] == ["0x3c00", "0xc100", "0x0", "0x7c00"]
    assert [hex(c) for c in dt.codes_of(np.array(x, np.float64), Dtype.BFLOAT16, g)] == \
        ["0x3f80", "0xc020", "0x0", "0x7f80"]
    assert [hex(c) for c in dt.codes_of(np.array([0.5, -3.0], np.float32), Dtype.FP16, g)] == ["0x3800", "0xc200"]
    assert dt.from_fp32(np.float32([1.0]), Dtype.FP16, g).dtype == np.uint16
    with pytest.raises(ValueError, match="1 of 1 values are not"):
        dt.codes_of(np.array([1.0 + 2.0 ** -10]), Dtype.BFLOAT16, g)


def test_codes_of_reads_every_element_type():
    """codes_of: ml_dtypes floats are values (a bfloat16 / float8 array converts to FP32 codes),
    ml_dtypes integers raise TypeError; big-endian codes come back native (their bytes as a little-
    endian memory holds them); NaN into a format without one (FP4 / FP8 E2M1-style, INT8) raises;
    the message names the first value that is not one, and signed codes may hold zero."""
    g = Gen.MAVERICK
    assert dt.codes_of(np.array([1.5, -2.0], md.bfloat16), Dtype.FP32, g).tolist() == [0x3FC00000, 0xC0000000]
    assert dt.codes_of(np.array([0.5], md.float8_e4m3fn), Dtype.FP32, g).tolist() == [0x3F000000]
    for t in (md.int4, md.uint4):
        with pytest.raises(TypeError, match="neither codes"):
            dt.codes_of(np.array([1, 2], t), Dtype.INT8, g)
    native = dt.codes_of(np.array([0x3F80, 0x0001], np.uint16), Dtype.BFLOAT16, g)
    swapped = dt.codes_of(np.array([0x3F80, 0x0001], ">u2"), Dtype.BFLOAT16, g)
    assert swapped.tobytes() == native.tobytes() == bytes([0x80, 0x3F, 0x01, 0x00])
    for dtype in (Dtype.FP4_EXP2, Dtype.FP8_EXP2, Dtype.INT8):
        with pytest.raises(ValueError, match="1 of 2 values are not"):
            dt.codes_of(np.array([1.0, np.nan], np.float32), dtype, g)
    x = np.array([1.0, 1.0 + 2.0 ** -10, 3.0 + 2.0 ** -8], np.float32)
    with pytest.raises(ValueError, match=re.escape("2 of 3 values are not bf16 values (the first is "
                                                   "1.0009765625, which rounds to 1.0)")):
        dt.codes_of(x, Dtype.BFLOAT16, g)
    with pytest.raises(ValueError, match=re.escape("2 of 2 values are not bf16 values (the first is "
                                                   "1.0000000000009095)")):
        dt.codes_of(np.array([1.0 + 2.0 ** -40, 3.0 + 2.0 ** -40]), Dtype.BFLOAT16, g)
    assert dt.to_fp32(np.array([0, 5, 0xFF], np.int64), Dtype.INT8, g).tolist() == [0, 5, -1]


def test_fp32r_decode_ignores_the_low_ten_bits():
    """An FP32R code is the top 22 bits of its 4 bytes: the low 10 are not part of the value."""
    codes = np.array([0x3F8003FF, 0xBF800001, 0x7F8003FF], np.uint32)
    assert dt.to_fp32(codes, Dtype.FP32R, Gen.CAYMAN).view(np.uint32).tolist() == \
        [0x3F800000, 0xBF800000, 0x7F800000]


def test_float_to_int_truncates_and_saturates():
    g = Gen.MAVERICK
    x = np.array([1.9, -1.9, 300.0, -300.0, np.nan, np.inf, -np.inf, -0.5], np.float32)
    assert dt.from_fp32(x, Dtype.INT8, g).tolist() == [1, 0xFF, 0x7F, 0x80, 0, 0x7F, 0x80, 0]
    assert dt.from_fp32(x, Dtype.UINT8, g).tolist() == [1, 0, 0xFF, 0, 0, 0xFF, 0, 0]
    big = np.array([3e19, 1.8e19, 9.3e18, -9.3e18, 2.0 ** 63, 2.0 ** 62], np.float32)
    assert dt.from_fp32(big, Dtype.UINT64, g).tolist() == \
        [2 ** 64 - 1, int(np.float32(1.8e19)), int(np.float32(9.3e18)), 0, 2 ** 63, 2 ** 62]
    assert dt.from_fp32(big, Dtype.INT64, g).tolist() == \
        [2 ** 63 - 1, 2 ** 63 - 1, 2 ** 63 - 1, 2 ** 64 - 2 ** 63, 2 ** 63 - 1, 2 ** 62]
    assert dt.from_fp32(np.array([7.9, -8.5, 100.0], np.float32), Dtype.INT4, g).tolist() == [7, 8, 7]


def test_cast_goes_through_fp32():
    g = Gen.MARIANA
    bf = dt.from_fp32(np.array([1.5, -2.25, 1e-3], np.float32), Dtype.BFLOAT16, g)
    fp8 = dt.cast(bf, Dtype.BFLOAT16, Dtype.FP8_EXP4, g)
    ref = dt.from_fp32(dt.to_fp32(bf, Dtype.BFLOAT16, g), Dtype.FP8_EXP4, g)
    np.testing.assert_array_equal(fp8, ref)
    np.testing.assert_array_equal(fp8, np.array([1.5, -2.25, 1e-3], np.float32)
                                  .astype(md.bfloat16).astype(np.float32).astype(md.float8_e4m3fn).view(np.uint8))
    # e4m3 flavour override (D-02 "a parameter may override")
    assert dt.from_fp32(np.array([300.0], np.float32), Dtype.FP8_EXP4, g, e4m3="ieee").tolist() == [0x78]


# --- stochastic rounding and the generator -----------------------------------------------------

@pytest.mark.parametrize("u", [0x3F800000, 0x3F801234, 0x3F80FFFF, 0x3F808000, 0xBF80ABCD,
                               0x00000001, 0x007FFFFF, 0x7F7FFFFF, 0xFF7F8000, 0x4049FFFF])
def test_sr_rounds_up_exactly_u_low_over_65536(u):
    r = np.arange(65536, dtype=np.uint32)
    out = dt.sr_bf16(np.full(65536, u, np.uint32), r)
    down, up = u >> 16, (u >> 16) + 1
    assert set(np.unique(out).tolist()) <= {down, up}
    assert int((out == up).sum()) == (u & 0xFFFF)
    assert int(out[0]) == down


def test_sr_special_cases():
    u = np.array([0x7F800000, 0xFF800000, 0x7F800001, 0xFFC12345, 0x7F7FFFFF, 0x80000000], np.uint32)
    out = dt.sr_bf16(u, np.full(6, 0xFFFF, np.uint32))
    assert [hex(v) for v in out] == ["0x7f80", "0xff80", "0x7fc0", "0xffc0", "0x7f80", "0x8000"]
    rand = np.array([0x8000] * 6, np.uint16)
    np.testing.assert_array_equal(dt.from_fp32(u.view(np.float32), Dtype.BFLOAT16, Gen.MARIANA,
                                               rounding="sr", rand=rand), dt.sr_bf16(u, rand))
    with pytest.raises(ValueError, match="BFLOAT16 only|only for"):
        dt.from_fp32(np.ones(1, np.float32), Dtype.FP16, Gen.MARIANA, rounding="sr", rand=[1])
    with pytest.raises(ValueError, match="16 bits"):
        dt.sr_bf16(np.ones(1, np.uint32), np.array([70000]))
    with pytest.raises(ValueError, match="16 bits"):
        dt.sr_bf16(np.ones(1, np.uint32), np.array([0x10000]))


def _xorshift_ref(s: int) -> int:
    s ^= (s << 13) & 0xFFFFFFFF
    s ^= s >> 17
    s ^= (s << 5) & 0xFFFFFFFF
    return s


def test_xorshift32_sequences():
    seeds = [1, 0x9E3779B9, 0xFFFFFFFF, 0x12345678, 0]
    states = np.array(seeds, np.uint32)
    ref = list(seeds)
    for _ in range(1000):
        states = dt.xorshift32(states)
        ref = [_xorshift_ref(s) for s in ref]
        assert states.tolist() == ref
    # Marsaglia's published xorshift32 (13,17,5) from 2463534242: first output 723471715
    assert dt.xorshift32(np.array([2463534242], np.uint32)).tolist() == [723471715]
    assert dt.xorshift32(np.zeros(3, np.uint32)).tolist() == [0, 0, 0]     # zero stays zero


def test_fp32_split_is_exact():
    rng = np.random.default_rng(SEED)
    x = rng.integers(0, 2 ** 32, 100000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = x[np.isfinite(x)]
    hi, lo = dt.split_fp32(x)
    assert not np.any(hi.view(np.uint32) & 0x3FF)
    np.testing.assert_array_equal(hi.astype(np.float64) + lo.astype(np.float64), x.astype(np.float64))


def test_nibble_packing_low_first():
    assert dt.pack_nibbles(np.array([1, 2, 3, 0xF], np.uint8)).tolist() == [0x21, 0xF3]
    assert dt.unpack_nibbles(np.array([0x21, 0xF3], np.uint8), 3).tolist() == [1, 2, 3]
    with pytest.raises(ValueError):
        dt.pack_nibbles(np.array([16]))
    with pytest.raises(ValueError, match="0..15"):
        dt.pack_nibbles(np.array([3, -1]))
    assert dt.pack_nibbles(np.array([1, 2, 3], np.uint8)).tolist() == [0x21, 0x03]   # padded with 0
    codes = np.random.default_rng(SEED).integers(0, 16, 1001).astype(np.uint8)
    packed = dt.pack_nibbles(codes)
    assert packed.size == 501 and packed[-1] == codes[-1]
    assert dt.unpack_nibbles(packed).tolist() == codes.tolist() + [0]
    assert dt.unpack_nibbles(packed, 1002).tolist() == codes.tolist() + [0]
    with pytest.raises(ValueError, match="1003 nibbles asked for, 1002 present"):
        dt.unpack_nibbles(packed, 1003)


# --- the enum, gates and roles -----------------------------------------------------------------

def test_enumerator_counts():
    assert [dt.enum_count(g) for g in (Gen.SUNDA, Gen.CAYMAN, Gen.MARIANA, Gen.MARIANA_PLUS,
                                       Gen.MAVERICK)] == [16, 16, 24, 24, 30]
    assert len(dt.TONGA_DTYPES) == 8
    assert dt.TONGA_DTYPES < dt.dtypes_of(Gen.SUNDA)
    assert sorted(dt.BASE_DTYPES - dt.TONGA_DTYPES) == [1, 2, 4, 9, 0xB, 0xD, 0xE, 0xF]
    chain = [dt.dtypes_of(g) for g in ALL_GENS]
    assert all(a <= b for a, b in zip(chain, chain[1:]))


# Truth tables written from seed 004 sections 1c and 3 (the codes listed there, by generation).
_BASE = set(range(0x10))
_MAR = _BASE | {0x10} | set(range(0x19, 0x20))
_MAV = _MAR | {0x11, 0x12, 0x13, 0x14, 0x15, 0x16}
_ENUM = {Gen.SUNDA: _BASE, Gen.CAYMAN: _BASE, Gen.MARIANA: _MAR, Gen.MARIANA_PLUS: _MAR, Gen.MAVERICK: _MAV}


def _truth(name, gen, allow):
    e = _ENUM[gen]
    fp32r, u64, i64 = allow.get("allow_fp32r", False), allow.get("allow_u64", False), allow.get("allow_i64", False)
    t = {
        "is_valid_dtype": e - {0, 0x01, 0x0C} - (set() if fp32r else {0x0B})
        - ({0x10, 0x12, 0x13, 0x14, 0x15, 0x16} if gen == Gen.MAVERICK else set()),
        "is_valid_dtype_64": e - {0} - (set() if fp32r else {0x0B}) - (set() if u64 else {0x01})
        - (set() if i64 else {0x0C}),
        "is_valid_int_dtype": {0x02, 0x04, 0x08, 0x0C, 0x03, 0x05, 0x09, 0x01},
        "is_valid_int_dtype_datapath": {0x02, 0x04, 0x08, 0x03, 0x05, 0x09},
        "is_valid_fp_dtype_datapath": {0x0D, 0x0E, 0x0F, 0x07, 0x06, 0x0A} | ({0x0B} if fp32r else set()),
        "is_valid_mx_dtype": {0x11, 0x0D, 0x0E, 0x0F, 0x10, 0x12},
        "is_signed_int": {0x02, 0x04, 0x08, 0x0C},
        "is_unsigned_int": {0x03, 0x05, 0x09, 0x01},
        "is_valid_32b_int_dtype": {0x08, 0x09},
        "is_valid_64b_int_dtype": {0x0C, 0x01},
        "is_valid_dtype_for_sdma": None,
        "is_cptc": {0x19, 0x1A, 0x1B, 0x1C, 0x1D, 0x1E, 0x1F},
    }[name]
    if name == "is_valid_dtype_for_sdma":
        t = _truth("is_valid_dtype", gen, {"allow_fp32r": fp32r}) & _BASE
    return t & e


_ALLOWS = {
    "is_valid_dtype": [{}, {"allow_fp32r": True}],
    "is_valid_dtype_64": [{}, {"allow_fp32r": True}, {"allow_u64": True}, {"allow_i64": True},
                          {"allow_fp32r": True, "allow_u64": True, "allow_i64": True}],
    "is_valid_fp_dtype_datapath": [{}, {"allow_fp32r": True}],
    "is_valid_dtype_for_sdma": [{}, {"allow_fp32r": True}],
}


def test_in_enum_and_one_byte_codes():
    """is_in_enum against seed 004's enum per generation, for every byte; a gate takes one byte."""
    for gen in ALL_GENS:
        verdicts = [dt.is_in_enum(c, gen) for c in range(256)]
        assert {c for c, v in enumerate(verdicts) if v} == _ENUM[gen] and {type(v) for v in verdicts} == {bool}
    for code in (0, 0xFF):
        dt.is_valid_dtype(code, Gen.MAVERICK)
    for code in (-1, 0x100):
        with pytest.raises(ValueError, match=f"a dtype is one byte, got {code}"):
            dt.is_valid_dtype(code, Gen.MAVERICK)


def test_generations_and_their_neuroncore_versions():
    """SUNDA..MAVERICK are 0..4, NC-v2, v3, v4, v4 (MARIANA_PLUS) and v5 (seed 004's generations)."""
    assert {n: int(g) for n, g in Gen.__members__.items()} == \
        {"SUNDA": 0, "CAYMAN": 1, "MARIANA": 2, "MARIANA_PLUS": 3, "MAVERICK": 4}
    assert [g.nc_version for g in Gen] == [2, 3, 4, 4, 5]


def test_sign_bit_masks():
    """The sign bit of a code: bit 15 of bf16 / fp16, bit 7 of the fp8 formats, none (0) for E8M0."""
    masks = {Dtype.BFLOAT16: 0x8000, Dtype.FP16: 0x8000, Dtype.FP8_EXP4: 0x80, Dtype.FP8_EXP5: 0x80,
             Dtype.FP4_EXP2: 0x8, Dtype.SFP8_E8: 0}
    assert {d: dt.format_of(d, Gen.MAVERICK).sign_bit for d in masks} == masks


def test_code_containers():
    """Codes live in the smallest unsigned container of their memory width: FP32R's 22-bit values
    take 4 bytes (seed 004), E8M0 one, bf16 two, each integer dtype its named width (INT signed)."""
    widths = {Dtype.FP32R: (32, np.uint32), Dtype.SFP8_E8: (8, np.uint8), Dtype.BFLOAT16: (16, np.uint16),
              Dtype.FP32: (32, np.uint32), Dtype.FP4_EXP2: (4, np.uint8), Dtype.INT4: (4, np.uint8),
              Dtype.INT8: (8, np.uint8), Dtype.UINT8: (8, np.uint8), Dtype.INT16: (16, np.uint16),
              Dtype.UINT16: (16, np.uint16), Dtype.INT32: (32, np.uint32), Dtype.UINT32: (32, np.uint32),
              Dtype.INT64: (64, np.uint64), Dtype.UINT64: (64, np.uint64)}
    for d, (bits, container) in widths.items():
        fmt = dt.format_of(d, Gen.MAVERICK)
        assert (fmt.width, dt.code_dtype(fmt)) == (bits, np.dtype(container)), d.name
        if isinstance(fmt, dt.IntFormat):
            assert fmt.signed == d.name.startswith("INT"), d.name


def test_dtype_pair_bounds():
    """DTYPE_PAIR nibbles take codes 0x0..0xF; its byte 0x00..0xFF (low nibble first)."""
    assert dt.pack_dtype_pair(0, 0xF) == 0xF0 and dt.pack_dtype_pair(0xF, 0) == 0x0F
    for lo, hi in ((-1, 0), (0, 0x10), (0x10, 0)):
        with pytest.raises(ValueError, match="does not fit a DTYPE_PAIR nibble"):
            dt.pack_dtype_pair(lo, hi)
    assert dt.unpack_dtype_pair(0) == (Dtype.INVALID, Dtype.INVALID)
    assert dt.unpack_dtype_pair(0xFF) == (Dtype.FP8_EXP5, Dtype.FP8_EXP5)
    for byte in (-1, 0x100):
        with pytest.raises(ValueError, match=f"DTYPE_PAIR is one byte, got {byte}"):
            dt.unpack_dtype_pair(byte)


def test_unknown_dtype_names_the_closest_and_every_alias():
    """Up to three close names (aliases too), the last joined by 'or'; then every dtype with its aliases."""
    assert dt.unknown_dtype(" FP8_EXP ").startswith("unknown dtype ' FP8_EXP '; did you mean fp8_exp5, fp8_exp4 "
                                                    "or fp8_exp3? dtypes (aliases): invalid, uint64 (u64), int8 (i8),")
    assert "; did you mean e4m3? " in dt.unknown_dtype("e4m")
    msg = dt.unknown_dtype("zzzz")
    assert msg.startswith("unknown dtype 'zzzz'; dtypes (aliases): invalid, ")
    assert ", fp32 (f32, float32), " in msg and ", sfp8_e7, " in msg and msg.endswith(", cptc7")


@pytest.mark.parametrize("gen", ALL_GENS, ids=[g.name for g in ALL_GENS])
@pytest.mark.parametrize("name", sorted(dt.GATES))
def test_gate_truth_tables(name, gen):
    for allow in _ALLOWS.get(name, [{}]):
        table = dt.gate_table(name, gen, **allow)
        assert table.shape == (256,) and set(np.nonzero(table)[0].tolist()) == _truth(name, gen, allow), \
            (name, gen.name, allow)


def test_cptc_codes():
    assert [dt.cptc_bits(c) for c in range(0x19, 0x20)] == [1, 2, 3, 4, 5, 6, 7]
    assert not dt.is_cptc(0x18) and not dt.is_cptc(0x10) and not dt.is_cptc(0x20)
    with pytest.raises(ValueError, match="transport-only"):
        dt.to_fp32([0], Dtype.CPTC3, Gen.MARIANA)


def test_roles_and_pairs():
    assert dt.Role.SCALE in dt.roles_of(Dtype.SFP8_E8)
    assert dt.Role.OUTPUT_ONLY in dt.roles_of("fp32r")
    assert dt.Role.PSUM in dt.roles_of(Dtype.FP32) and dt.Role.PSUM in dt.roles_of(Dtype.BFLOAT16)
    assert {d for d in Dtype if dt.Role.MX_ELEMENT in dt.roles_of(d)} == \
        {Dtype.FP8_EXP2, Dtype.FP8_EXP3, Dtype.FP8_EXP4, Dtype.FP8_EXP5, Dtype.FP4_EXP2, Dtype.INT4}
    assert all(dt.roles_of(d) for d in Dtype)
    assert dt.pack_dtype_pair(Dtype.FP16, Dtype.BFLOAT16) == 0x67
    assert dt.unpack_dtype_pair(0x67) == (Dtype.FP16, Dtype.BFLOAT16)
    with pytest.raises(ValueError, match="nibble"):
        dt.pack_dtype_pair(Dtype.FP4_EXP2, Dtype.FP32)
    assert not dt.has_basic_alias(Gen.CAYMAN) and dt.has_basic_alias(Gen.MARIANA)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="does not exist on MARIANA"):
        dt.to_fp32([0], Dtype.FP8_EXP2, Gen.MARIANA)
    with pytest.raises(ValueError, match="does not fit"):
        dt.to_fp32([256], Dtype.FP8_EXP5, Gen.MARIANA)
    with pytest.raises(ValueError, match="negative"):
        dt.to_fp32(np.array([-1]), Dtype.FP8_EXP5, Gen.MARIANA)
    with pytest.raises(TypeError):
        dt.to_fp32(np.array([1.0]), Dtype.FP8_EXP5, Gen.MARIANA)
    with pytest.raises(ValueError, match="unknown generation"):
        Gen.parse("tonga2")
    with pytest.raises(ValueError, match="no numeric format"):
        dt.to_fp32([0], Dtype.INVALID, Gen.MARIANA)
    assert Dtype.parse("bf16") == Dtype.BFLOAT16 and Dtype.parse(0x0E) == Dtype.FP8_EXP4
    assert Gen.parse("mariana_plus").layout == Gen.MARIANA and Gen.parse(0).layout == Gen.CAYMAN


@pytest.mark.parametrize("dtype,gen,twin", TWINS, ids=TWIN_IDS)
def test_special_codes_are_the_twins(dtype, gen, twin):
    """A format's nan_code is a code its twin decodes to NaN, and -1 exactly when no code of the twin
    is NaN (FP4_EXP2); inf_code is the twin's +Inf code, and -1 when it has none (callers test both
    against -1: dtypes.FloatFormat)."""
    fmt = dt.format_of(dtype, gen)
    width = 4 if twin is md.float4_e2m1fn else 8 * np.dtype(twin).itemsize
    codes = np.arange(1 << width, dtype=np.uint8 if width <= 8 else np.uint16)
    values = codes.view(twin).astype(np.float32)
    nans, infs = np.flatnonzero(np.isnan(values)), np.flatnonzero(np.isposinf(values))
    assert fmt.nan_code == -1 if nans.size == 0 else fmt.nan_code in nans, (fmt.nan_code, nans)
    assert fmt.inf_code == (int(infs[0]) if infs.size else -1)
