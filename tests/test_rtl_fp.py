"""The RTL floating-point datapath (rtl/fp/) against the golden model, in bulk through Verilator."""
import numpy as np
import pytest

from tensore.cosim.vectors import VectorRunner
from tensore.model import dtypes as dt
from tensore.model.dtypes import Dtype
from tensore.model.mac import canonical_nan, fused_sum
from tensore.rtl.fp.fused_add import FusedAdd
from tensore.rtl.fp.pe_mac import PART_FULL, PART_HI, PART_LO, PeMac, parse_dtypes

pytestmark = pytest.mark.verilator
SEED = 20261130
ACCUMULATORS = np.array([0, 0x80000000, 1, 0x80000001, 0x00400000, 0x807FFFFF, 0x3F800000, 0xBF800000,
                         0x7F7FFFFF, 0xFF7FFFFF, 0x7F000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFA00001,
                         0x4B000001, 0x33800000], np.uint32)


def golden(psum, terms):
    with np.errstate(all="ignore"):
        return canonical_nan(fused_sum(np.asarray(psum, np.uint32).view(np.float32), terms)).view(np.uint32)


def values(codes, dtype, gen):
    with np.errstate(all="ignore"):
        return dt.to_fp32(np.asarray(codes).astype(np.uint64), dtype, gen).astype(np.float64)


@pytest.fixture(scope="module")
def mac1():
    return {g: VectorRunner(PeMac(g, 1), f"pe_mac_{g}_1") for g in ("cayman", "maverick")}


def run1(runner, psum, a, w, adt, wdt, a_part=PART_FULL, w_part=PART_FULL):
    n = len(psum)
    return runner(psum=psum, a_dtype=np.full(n, int(Dtype.parse(adt))), w_dtype=np.full(n, int(Dtype.parse(wdt))),
                  a_part=np.full(n, a_part), w_part=np.full(n, w_part), a0=a, w0=w)["result"].astype(np.uint32)


def test_fused_add_random_and_specials():
    rng = np.random.default_rng(SEED)
    r = VectorRunner(FusedAdd(48), "fused_add_48")
    n = 200_000
    psum = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    psum[: n // 2] = (psum[: n // 2] & 0x807FFFFF) | (rng.integers(100, 160, n // 2).astype(np.uint32) << 23)
    psum[::97] = rng.choice(ACCUMULATORS, len(psum[::97]))
    mag = rng.integers(0, 2 ** 48, n, dtype=np.uint64) >> rng.integers(0, 48, n).astype(np.uint64)
    texp = np.where(rng.random(n) < 0.5, rng.integers(-60, 10, n), rng.integers(-300, 110, n))
    tsign = rng.integers(0, 2, n)
    tnan = rng.random(n) < 0.01
    tinf = (rng.random(n) < 0.01) & ~tnan
    for i in range(11, n, 31):               # exact cancellations: term = -psum
        v = int(psum[i])
        e, f = (v >> 23) & 0xFF, v & 0x7FFFFF
        if e not in (0, 255):
            mag[i], texp[i], tsign[i], tnan[i], tinf[i] = f | (1 << 23), e - 150, 1 - (v >> 31), False, False
    term = np.ldexp(mag.astype(np.float64), texp) * np.where(tsign == 1, -1.0, 1.0)
    term = np.where(tnan, np.nan, np.where(tinf, np.where(tsign == 1, -np.inf, np.inf), term))
    out = r(psum=psum, t_sign=tsign, t_mag=mag, t_exp=texp, t_nan=tnan, t_inf=tinf)["result"].astype(np.uint32)
    np.testing.assert_array_equal(out, golden(psum, [term]))


FP8 = [("cayman", "fp8_exp4"), ("maverick", "fp8_exp4"), ("maverick", "fp8_exp5"), ("maverick", "fp8_exp3"),
       ("maverick", "fp8_exp2"), ("cayman", "fp8_exp5")]


@pytest.mark.parametrize("gen,dtype", FP8, ids=[f"{g}-{d}" for g, d in FP8])
def test_every_fp8_pair_against_accumulators(mac1, gen, dtype):
    """All 65536 code pairs of the format times 17 accumulator values (±0, subnormals, max, Inf, NaN)."""
    code = np.arange(256, dtype=np.uint32)
    a, w = (x.ravel() for x in np.meshgrid(code, code, indexing="ij"))
    a, w = np.repeat(a, len(ACCUMULATORS)), np.repeat(w, len(ACCUMULATORS))
    psum = np.tile(ACCUMULATORS, 65536)
    out = run1(mac1[gen], psum, a, w, dtype, dtype)
    np.testing.assert_array_equal(out, golden(psum, [values(a, dtype, gen) * values(w, dtype, gen)]))


@pytest.mark.parametrize("pair", [("bf16", "bf16"), ("fp16", "fp16"), ("bf16", "fp8_exp4"), ("fp16", "fp8_exp5"),
                                  ("bf16", "fp16")], ids=lambda p: f"{p[0]}x{p[1]}")
def test_16bit_random_and_special_classes(mac1, pair):
    adt, wdt = pair
    rng = np.random.default_rng(SEED + len(adt + wdt))
    n = 150_000
    bits = {d: dt.format_of(d, "maverick").bits for d in pair}
    a = rng.integers(0, 1 << bits[adt], n)
    w = rng.integers(0, 1 << bits[wdt], n)
    psum = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    psum[::5] = rng.choice(ACCUMULATORS, len(psum[::5]))
    # every special class pairing: zeros, subnormals, max, Inf, NaN of both operands
    fa, fw = dt.format_of(adt, "maverick"), dt.format_of(wdt, "maverick")
    spec = lambda f: [0, 1, f.max_code, f.inf_code if f.inf else f.max_code, f.nan_code if f.nan_code >= 0 else 1,  # noqa
                      (1 << f.man_bits), (1 << f.man_bits) - 1]
    sa = np.array(spec(fa) + [x | fa.sign_bit for x in spec(fa)])
    sw = np.array(spec(fw) + [x | fw.sign_bit for x in spec(fw)])
    ga, gw = (x.ravel() for x in np.meshgrid(sa, sw, indexing="ij"))
    a = np.concatenate([a, np.repeat(ga, len(ACCUMULATORS))])
    w = np.concatenate([w, np.repeat(gw, len(ACCUMULATORS))])
    psum = np.concatenate([psum, np.tile(ACCUMULATORS, len(ga))])
    out = run1(mac1["maverick"], psum, a, w, adt, wdt)
    np.testing.assert_array_equal(out, golden(psum, [values(a, adt, "maverick") * values(w, wdt, "maverick")]))


@pytest.mark.parametrize("a_part,w_part", [(PART_FULL, PART_FULL), (PART_HI, PART_HI), (PART_HI, PART_LO),
                                           (PART_LO, PART_HI), (PART_LO, PART_LO)])
def test_fp32_mode_parts(mac1, a_part, w_part):
    """fp32_mode passes (D-12): full (HIGH), hi*hi (LOW) and the LOW_HIGH cross terms."""
    rng = np.random.default_rng(SEED + 3 * a_part + w_part)
    n = 100_000
    a = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    w = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    a[: n // 2] = rng.standard_normal(n // 2).astype(np.float32).view(np.uint32)
    psum = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    psum[::4] = rng.choice(ACCUMULATORS, len(psum[::4]))
    part = lambda x, p: {PART_FULL: x, PART_HI: dt.split_fp32(x)[0], PART_LO: dt.split_fp32(x)[1]}[p]  # noqa
    with np.errstate(all="ignore"):
        av = part(a.view(np.float32), a_part).astype(np.float64)
        wv = part(w.view(np.float32), w_part).astype(np.float64)
    out = run1(mac1["maverick"], psum, a, w, "fp32", "fp32", a_part, w_part)
    np.testing.assert_array_equal(out, golden(psum, [av * wv]))


# specialised builds (D-T62) carry a datapath as wide as their widest significand (D-T83)
NARROW = {"bf16": ["bf16"], "fp8": ["fp8_exp4", "fp8_exp5"]}


@pytest.fixture(scope="module")
def narrow():
    return {k: VectorRunner(PeMac("maverick", 1, dtypes=parse_dtypes("maverick", v)), f"pe_mac_maverick_1_{k}")
            for k, v in NARROW.items()}


def test_narrow_datapath_widths():
    widths = {k: PeMac("maverick", 1, dtypes=parse_dtypes("maverick", v)).term_width for k, v in NARROW.items()}
    assert widths == {"bf16": 16, "fp8": 8} and PeMac("maverick", 1).term_width == 48


def test_bf16_only_mac_random_and_special_classes(narrow):
    """The bf16-only MAC (16-bit products, a 24-bit window) on random pairs and every special-class
    pairing against every accumulator class."""
    test_16bit_random_and_special_classes({"maverick": narrow["bf16"]}, ("bf16", "bf16"))


@pytest.mark.parametrize("dtype", ["fp8_exp4", "fp8_exp5"])
def test_fp8_only_mac_every_pair(narrow, dtype):
    test_every_fp8_pair_against_accumulators({"maverick": narrow["fp8"]}, "maverick", dtype)


@pytest.fixture(scope="module")
def mac8():
    return VectorRunner(PeMac("maverick", 8), "pe_mac_maverick_8")


@pytest.mark.parametrize("dtype,terms", [("fp8_exp5", 8), ("fp8_exp4", 8), ("fp8_exp3", 4), ("fp8_exp2", 8),
                                         ("fp4_exp2", 8), ("int4", 4), ("fp8_exp4", 2)])
def test_multi_term_with_mx_scales(mac8, dtype, terms):
    """MX QUAD / OCT steps (and unscaled double row): exact product sums, scale extremes, NaN scales;
    the lanes past the step's products hold random codes (Inf and NaN among them) and count as +0."""
    rng = np.random.default_rng(SEED + terms + int(Dtype.parse(dtype)))
    n = 100_000
    width = dt.format_of(dtype, "maverick").bits if dtype != "int4" else 4
    codes = {}
    for j in range(8):
        for side in "aw":
            c = rng.integers(0, 1 << width, n)
            codes[f"{side}{j}"] = c
    psum = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    psum[::3] = (rng.standard_normal(len(psum[::3])).astype(np.float32) * 100).view(np.uint32)
    psum[1::11] = rng.choice(ACCUMULATORS, len(psum[1::11]))
    sa, sw = rng.integers(-127, 128, n), rng.integers(-127, 128, n)
    sa[::7], sw[::7], sa[1::7], sw[1::7] = 127, 127, -127, -127
    san, swn = rng.random(n) < 0.01, rng.random(n) < 0.01
    scaled = np.full(n, 0 if terms == 2 else 1)
    code = int(Dtype.parse(dtype))
    out = mac8(psum=psum, a_dtype=np.full(n, code), w_dtype=np.full(n, code), a_part=np.zeros(n), w_part=np.zeros(n),
               multi=np.ones(n), scaled=scaled, sa=sa, sw=sw, sa_nan=san, sw_nan=swn,
               lanes=np.full(n, (terms - 1).bit_length()), **codes)["result"].astype(np.uint32)
    scale = np.where(scaled == 1, np.exp2((sa + sw).astype(np.float64)), 1.0)
    scale = np.where((scaled == 1) & (san | swn), np.nan, scale)
    with np.errstate(all="ignore"):
        tv = [values(codes[f"a{j}"], dtype, "maverick") * values(codes[f"w{j}"], dtype, "maverick") * scale
              for j in range(terms)]
    np.testing.assert_array_equal(out, golden(psum, tv))
