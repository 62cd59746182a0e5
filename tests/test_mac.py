"""model.mac and model.fp: the IVP integer MAC family and the IEEE FMA against independent oracles."""
import numpy as np
import pytest
import softfloatpy as sf

from tensore.model import mac
from tensore.model.fp import Flag, Rounding, fma

SEED = 20261130


# --- integer widening MAC (seed 002 sections 4-9) -------------------------------------------------

def test_seed_executed_values():
    """seed 002 section 5.3: (-1) lands at 0xffffff (int8) and 0xffffffffffff (int16); wrap, no saturate."""
    assert mac.mac(np.zeros(64), [(np.full(64, 0xFF), np.full(64, 1))], width=8).tolist() == [0xFFFFFF] * 64
    assert mac.mac(np.zeros(32), [(np.full(32, 0xFFFF), np.full(32, 1))], width=16).tolist() == [0xFFFFFFFFFFFF] * 32
    assert mac.mac(np.full(64, 0xFFFFFF), [(np.full(64, 1), np.full(64, 1))], width=8).tolist() == [0] * 64
    # 127 * 127 accumulated 1041 times passes 2^24 and wraps
    acc = np.zeros(64, np.int64)
    for _ in range(1041):
        acc = mac.mac(acc, [(np.full(64, 127), np.full(64, 127))], width=8)
    assert acc[0] == (1041 * 127 * 127) % (1 << 24)
    # muls: acc48 - a*b ; muluua: unsigned product
    assert mac.mac(np.zeros(32), [(np.full(32, 3), np.full(32, 5))], width=16, subtract=True)[0] == (1 << 48) - 15
    assert mac.mac(np.zeros(32), [(np.full(32, 0xFFFF), np.full(32, 0xFFFF))], width=16, signs="uu")[0] == 0xFFFE0001


def _ref_lane(acc, terms, width, signs, subtract, bits):
    def val(x, s):
        x &= (1 << width) - 1
        return x - (1 << width) if s == "s" and x >> (width - 1) else x
    total = sum(val(a, signs[0]) * val(b, signs[1]) for a, b in terms)
    return (acc - total if subtract else acc + total) % (1 << bits)


@pytest.mark.parametrize("width", [8, 16, 32])
@pytest.mark.parametrize("signs", ["ss", "uu", "su", "us"])
@pytest.mark.parametrize("nterms", [1, 2, 4])
def test_mac_forms_against_python_ints(width, signs, nterms):
    rng = np.random.default_rng(SEED + width + nterms)
    n, bits = mac.LANES[width], mac.ACC_BITS[width]
    for trial in range(20):                    # codes with bits above the lane width: a lane reads its low bits
        acc = np.array([int(x) for x in rng.integers(0, 2 ** 62, n, dtype=np.uint64)], object)
        terms = [(rng.integers(0, 2 ** 63, n, dtype=np.uint64),
                  rng.integers(0, 2 ** 63, n, dtype=np.uint64)) for _ in range(nterms)]
        if trial % 3 == 0:                     # XR form: one factor broadcast from the reduce register
            terms = [(a, int(b[0])) for a, b in terms]
        pred = rng.integers(0, 2, n).astype(bool) if trial % 4 == 1 else None
        subtract = trial % 2 == 1
        got = mac.mac(acc, terms, width=width, signs=signs, subtract=subtract, pred=pred)
        for i in range(n):
            lane_terms = [(int(a[i]), int(b) if np.isscalar(b) or isinstance(b, int) else int(b[i])) for a, b in terms]
            ref = _ref_lane(int(acc[i]), lane_terms, width, signs, subtract, bits)
            if pred is not None and not pred[i]:
                ref = int(acc[i]) % (1 << bits)
            assert int(got[i]) == ref
        assert got.dtype == (object if bits > 64 else np.int64)        # 96-bit lanes as Python ints


def test_wvec_file_pack_mac_unpack():
    wf = mac.WvecFile()
    wf.pack(2, 16)                                                     # zero
    for _ in range(3):
        wf.mac(2, [(np.full(32, 0x7FFF), np.full(32, 0x7FFF)), (np.arange(32), np.full(32, 2))], width=16)
    got = wf.unpack(2, 16)
    assert got.tolist() == [(3 * (0x7FFF * 0x7FFF + 2 * i)) % (1 << 48) for i in range(32)]
    wf.pack(1, 32, np.full(16, -1, object))
    assert wf.unpack(1, 32).tolist() == [(1 << 96) - 1] * 16                # 96-bit lanes
    assert wf.unpack(2, 8).shape == (64,)                                   # same 1536 bits, other lanes
    with pytest.raises(ValueError):
        wf.pack(4, 8)
    assert [mac.mac_chain_cycles(n) for n in (-1, 0, 1, 2, 100)] == [0, 0, 13, 14, 112]   # written at stage 12


def test_vector_and_accumulator_sizes():
    """seed 002 sections 4 and 7: 512-bit vectors of 64 / 32 / 16 lanes into 24 / 48 / 96-bit
    accumulator lanes; a wide-vector file of 4 entries (0..3, each usable, zero at reset) x 1536 bits."""
    assert mac.LANES == {8: 64, 16: 32, 32: 16} and mac.ACC_BITS == {8: 24, 16: 48, 32: 96}
    wf = mac.WvecFile()
    assert all(wf.unpack(i, 8).tolist() == [0] * 64 for i in range(4))
    for i in range(4):
        wf.pack(i, 8, np.full(64, i + 1))
    assert [int(wf.unpack(i, 8)[63]) for i in range(4)] == [1, 2, 3, 4]
    assert int(wf.unpack(3, 32)[15]) == sum(4 << (24 * k) for k in range(4))     # lanes 60..63 of 24 bits
    for width, dtype in ((8, np.int64), (16, np.int64), (32, object)):
        assert wf.unpack(3, width).dtype == dtype
    wf.pack(0, 8, [-1] + [0] * 63)                                          # a lane keeps to its 24 bits
    assert wf.unpack(0, 8)[:2].tolist() == [0xFFFFFF, 0]
    for i in (-1, 4):
        with pytest.raises(ValueError, match=rf"wvec has entries 0\.\.3, got {i}"):
            wf.unpack(i, 8)


@pytest.mark.parametrize("nterms", [0, 3, 5])
def test_a_mac_sums_one_two_or_four_products(nterms):
    with pytest.raises(ValueError, match=f"products, got {nterms}"):
        mac.mac(np.zeros(64), [(np.ones(64), np.ones(64))] * nterms, width=8)


# --- the IEEE FMA against SoftFloat (seed 002 section 5.5) -----------------------------------------

def test_rounding_modes_and_flags_are_softfloats():
    """Rounding and Flag are SoftFloat's numbering, read from softfloatpy's own enums (aliases too)."""
    modes = {"RNE": "NEAR_EVEN", "RTZ": "MIN_MAG", "RDN": "MIN", "RUP": "MAX", "RMM": "NEAR_MAX_MAG"}
    flags = {"INEXACT": "INEXACT", "UNDERFLOW": "UNDERFLOW", "OVERFLOW": "OVERFLOW", "DIVBYZERO": "INFINITE",
             "INVALID": "INVALID"}
    ours = {n: int(m) for n, m in [*Rounding.__members__.items(), *Flag.__members__.items()]}
    assert ours == {**{n: int(sf.RoundingMode[v]) for n, v in modes.items()},
                    **{n: int(sf.ExceptionFlag[v]) for n, v in flags.items()}}


SPECIAL32 = [0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x3F800000, 0xBF800000,
             0x3F800001, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7FA00000, 0x33800000,
             0x4B800000, 0x3F000000, 0x5F800000, 0x1F800000]
SPECIAL16 = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x3C01, 0x7BFF, 0xFBFF,
             0x7C00, 0xFC00, 0x7E00, 0x7D00, 0x1400, 0x6400, 0x3800, 0x5800, 0x2000]


def _operands(width, n, rng):
    special = np.array(SPECIAL32 if width == 32 else SPECIAL16, np.uint64)
    idx = np.indices((len(special),) * 3).reshape(3, -1)
    sa, sb, sc = special[idx[0]], special[idx[1]], special[idx[2]]
    hi = 2 ** width
    r = [rng.integers(0, hi, n, dtype=np.uint64) for _ in range(3)]
    if width == 32:           # half the random cases near each other in exponent: cancellation and ties
        e = rng.integers(90, 160, (3, n // 2)).astype(np.uint64)
        for i in range(3):
            r[i][: n // 2] = (r[i][: n // 2] & np.uint64(0x807FFFFF)) | (e[i] << np.uint64(23))
    dt = np.uint32 if width == 32 else np.uint16
    return [np.concatenate([s, x]).astype(dt) for s, x in zip((sa, sb, sc), r)]


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(Rounding), ids=[m.name for m in Rounding])
@pytest.mark.parametrize("width", [32, 16])
def test_fma_matches_softfloat(width, mode):
    """10^5 random and 8000 special-value triples per format and rounding mode: bits and flags."""
    rng = np.random.default_rng(SEED + width + int(mode))
    a, b, c = _operands(width, 100_000, rng)
    res, flags = fma(a, b, c, "f32" if width == 32 else "f16", mode)
    F, mul = (sf.Float32, sf.f32_mul_add) if width == 32 else (sf.Float16, sf.f16_mul_add)
    nbytes = width // 8
    sf.set_rounding_mode(sf.RoundingMode(int(mode)))
    sf.set_tininess_mode(sf.TininessMode.AFTER_ROUNDING)
    bad = []
    for i in range(a.size):
        sf.set_exception_flags(0)
        r = mul(F.from_bytes(int(a[i]).to_bytes(nbytes, "big")), F.from_bytes(int(b[i]).to_bytes(nbytes, "big")),
                F.from_bytes(int(c[i]).to_bytes(nbytes, "big")))
        ref, ref_flags = int.from_bytes(r.to_bytes(), "big"), int(sf.get_exception_flags())
        if ref != int(res[i]) or ref_flags != int(flags[i]):
            bad.append((hex(a[i]), hex(b[i]), hex(c[i]), hex(ref), ref_flags, hex(res[i]), int(flags[i])))
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    assert not bad, bad[:5]


def test_fma_flags_examples():
    one, tiny = np.uint32(0x3F800000), np.uint32(0x00000001)
    r, f = fma(np.array([0x7F800000], np.uint32), np.array([0], np.uint32), np.array([one]))
    assert r[0] == 0x7FC00000 and f[0] == Flag.INVALID
    r, f = fma(np.array([0x7F7FFFFF], np.uint32), np.array([0x40000000], np.uint32), np.array([0], np.uint32))
    assert r[0] == 0x7F800000 and f[0] == Flag.OVERFLOW | Flag.INEXACT
    r, f = fma(np.array([tiny]), np.array([0x3F000000], np.uint32), np.array([0], np.uint32))
    assert r[0] == 0 and f[0] == Flag.UNDERFLOW | Flag.INEXACT
    r, f = fma(np.array([one]), np.array([one]), np.array([0xBF800000], np.uint32), "f32", Rounding.RDN)
    assert r[0] == 0x80000000 and f[0] == 0                  # exact cancellation toward -inf is -0


# --- the PE's fused accumulate ---------------------------------------------------------------------

def test_fused_sum_exact_where_float64_is_not():
    """Products whose exact sum needs 64 bits: the float64 sum would lose 2^-32 against -2^31."""
    psum = np.array([-(2.0 ** 31)], np.float32)
    terms = [np.array([2.0 ** 31]), np.array([2.0 ** -32])]
    assert mac.fused_sum(psum, terms)[0] == np.float32(2.0 ** -32)
    # an exact tie broken only by a term far below it
    psum = np.array([1.0], np.float32)
    terms = [np.array([2.0 ** -24]), np.array([2.0 ** -80])]
    assert mac.fused_sum(psum, terms)[0] == np.nextafter(np.float32(1), np.float32(2))
    terms = [np.array([2.0 ** -24]), np.array([-(2.0 ** -80)])]
    assert mac.fused_sum(psum, terms)[0] == np.float32(1.0)


def test_fused_sum_specials_and_zero_signs():
    ninf, inf, nan = -np.inf, np.inf, np.nan
    p = np.array([0.0, -0.0, -0.0, 1.0, inf, 0.0], np.float32)
    t1 = np.array([-0.0, -0.0, 0.0, ninf, ninf, nan])
    out = mac.fused_sum(p, [t1])
    assert [np.signbit(x) for x in out[:3]] == [False, True, False]
    assert out[3] == -np.inf and np.isnan(out[4]) and np.isnan(out[5])
    assert mac.canonical_nan(out).view(np.uint32)[4] == 0x7FC00000
