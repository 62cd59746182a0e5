"""model.array.matmul bit-exact against SoftFloat chains and the exact Fraction oracle."""
import numpy as np
import pytest

from tensore.model import dtypes as dt
from tensore.model.array import matmul
from tensore.model.dtypes import Dtype, Gen
from tests.oracles import fused_chain_oracle, softfloat_chain

SEED = 20261130
SINGLE = [(d, g) for g in (Gen.CAYMAN, Gen.MARIANA, Gen.MAVERICK)
          for d in (Dtype.BFLOAT16, Dtype.FP16, Dtype.FP8_EXP3, Dtype.FP8_EXP4, Dtype.FP8_EXP5)] + \
    [(Dtype.FP8_EXP2, Gen.MAVERICK), (Dtype.BFLOAT16, Gen.SUNDA), (Dtype.FP8_EXP4, Gen.MARIANA_PLUS)]


def codes(rng, dtype, gen, shape, special=True):
    """Random codes: all bit patterns (subnormals, Inf, NaN) mixed with well-scaled values."""
    fmt = dt.format_of(dtype, gen)
    raw = rng.integers(0, 1 << fmt.bits, shape, dtype=np.uint64)
    nice = dt.from_fp32(rng.standard_normal(shape).astype(np.float32), dtype, gen).astype(np.uint64)
    keep = rng.random(shape) < (0.15 if special else 0.0)
    return np.where(keep, raw, nice)


@pytest.mark.parametrize("dtype,gen", SINGLE, ids=[f"{d.name}-{g.name}" for d, g in SINGLE])
def test_single_product_dtypes_vs_softfloat(dtype, gen):
    rng = np.random.default_rng(SEED + int(dtype) + 16 * int(gen))
    st, mv = codes(rng, dtype, gen, (24, 6)), codes(rng, dtype, gen, (24, 9))
    got = matmul(st, mv, in_dtype=dtype, gen=gen).view(np.uint32)
    ref = softfloat_chain(dt.to_fp32(st, dtype, gen), dt.to_fp32(mv, dtype, gen))
    np.testing.assert_array_equal(got, ref)


def test_mixed_low_precision_dtypes():
    rng = np.random.default_rng(SEED)
    for sdt, mdt in [(Dtype.BFLOAT16, Dtype.FP8_EXP4), (Dtype.FP16, Dtype.BFLOAT16), (Dtype.FP8_EXP5, Dtype.FP16)]:
        st, mv = codes(rng, sdt, Gen.MARIANA, (16, 5)), codes(rng, mdt, Gen.MARIANA, (16, 7))
        got = matmul(st, mv, in_dtype=mdt, stationary_dtype=sdt, gen="mariana").view(np.uint32)
        ref = softfloat_chain(dt.to_fp32(st, sdt, Gen.MARIANA), dt.to_fp32(mv, mdt, Gen.MARIANA))
        np.testing.assert_array_equal(got, ref)


def test_out_of_fp32_range_products_take_the_exact_path():
    """bf16 products below 2^-126 or above 2^128 are not exact in float32: the model must notice."""
    st = dt.from_fp32(np.array([[2.0 ** -100], [2.0 ** 100], [1.0]], np.float32), "bf16", "cayman")
    mv = dt.from_fp32(np.array([[2.0 ** -40], [2.0 ** 60], [-(2.0 ** 127)]], np.float32), "bf16", "cayman")
    got = matmul(st, mv, in_dtype="bf16", gen="cayman").view(np.uint32)
    ref = softfloat_chain(dt.to_fp32(st, "bf16", "cayman"), dt.to_fp32(mv, "bf16", "cayman"))
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("mode", ["low", "high", "low_high"])
def test_fp32_modes(mode):
    rng = np.random.default_rng(SEED + len(mode))
    st = rng.standard_normal((20, 4)).astype(np.float32)
    mv = rng.standard_normal((20, 6)).astype(np.float32)
    st[3, 1], mv[5, 2], mv[7, 0] = 1e-40, 3e38, -np.inf
    got = matmul(st.view(np.uint32), mv.view(np.uint32), in_dtype="fp32", gen="maverick",
                 fp32_mode=mode).view(np.uint32)
    hi_a, lo_a = dt.split_fp32(mv)
    hi_w, lo_w = dt.split_fp32(st)
    if mode == "high":
        ref = softfloat_chain(st, mv)
    elif mode == "low":
        ref = softfloat_chain(hi_w, hi_a)
    else:        # D-12 / D-T24: per row, four fused adds hi*hi, hi*lo, lo*hi, lo*lo (moving*stationary)
        w = np.stack([hi_w, lo_w, hi_w, lo_w], 1).astype(np.float64).reshape(20 * 4, 1, 4)
        a = np.stack([hi_a, hi_a, lo_a, lo_a], 1).astype(np.float64).reshape(20 * 4, 1, 6)
        ref = fused_chain_oracle(w, a)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("dtype", [Dtype.FP8_EXP4, Dtype.FP8_EXP5, Dtype.FP8_EXP3])
def test_double_row_sums_two_products_exactly(dtype):
    rng = np.random.default_rng(SEED + int(dtype))
    st, mv = codes(rng, dtype, Gen.MARIANA, (16, 5)), codes(rng, dtype, Gen.MARIANA, (16, 7))
    got = matmul(st, mv, in_dtype=dtype, gen="mariana", perf_mode="double_row").view(np.uint32)
    w = dt.to_fp32(st, dtype, Gen.MARIANA).astype(np.float64).reshape(8, 2, 5)
    a = dt.to_fp32(mv, dtype, Gen.MARIANA).astype(np.float64).reshape(8, 2, 7)
    np.testing.assert_array_equal(got, fused_chain_oracle(w, a))


def test_double_row_needs_exact_sum_beyond_float64():
    """e5m2: 57344^2 and a 2^-32 product in one step against a psum that cancels the large one."""
    big, tiny = dt.from_fp32(np.array([57344.0, 2.0 ** -16], np.float32), "fp8_e5m2", "mariana")
    st = np.array([[0x3C], [0xBC], [big], [tiny]], np.uint64)      # rows: (1, -1) then (big, tiny)
    mv = np.array([[0x00], [0x00], [big], [tiny]], np.uint64)
    got = matmul(st, mv, in_dtype="fp8_e5m2", gen="mariana", perf_mode="double_row")
    ref = fused_chain_oracle(dt.to_fp32(st, "fp8_e5m2", "mariana").astype(np.float64).reshape(2, 2, 1),
                             dt.to_fp32(mv, "fp8_e5m2", "mariana").astype(np.float64).reshape(2, 2, 1))
    np.testing.assert_array_equal(got.view(np.uint32), ref)


@pytest.mark.parametrize("perf", ["quad_row", "oct_row"])
@pytest.mark.parametrize("dtype", [Dtype.FP8_EXP2, Dtype.FP8_EXP4, Dtype.FP4_EXP2, Dtype.INT4, Dtype.FP8_EXP5])
def test_mx_with_scales(dtype, perf):
    rng = np.random.default_rng(SEED + int(dtype) + len(perf))
    pack = 4 if perf == "quad_row" else 8
    k, m, n = 64, 5, 6
    st, mv = codes(rng, dtype, Gen.MAVERICK, (k, m)), codes(rng, dtype, Gen.MAVERICK, (k, n))
    sw = rng.integers(110, 145, (k // 32, m))
    sa = rng.integers(110, 145, (k // 32, n))
    sw[0, 0], sa[1, 2], sw[1, 3], sa[0, 4] = 0xFF, 0, 254, 254           # NaN block, extremes
    got = matmul(st, mv, in_dtype=dtype, gen="maverick", perf_mode=perf, stationary_scales=sw,
                 moving_scales=sa).view(np.uint32)
    rows = k // pack
    w = dt.to_fp32(st, dtype, Gen.MAVERICK).astype(np.float64).reshape(rows, pack, m)
    a = dt.to_fp32(mv, dtype, Gen.MAVERICK).astype(np.float64).reshape(rows, pack, n)
    blk = (np.arange(rows) * pack) // 32
    exp = lambda s: np.where(s == 0xFF, np.nan, s - 127.0)           # noqa: E731
    np.testing.assert_array_equal(got, fused_chain_oracle(w, a, (exp(sw)[blk], exp(sa)[blk])))
    assert np.isnan(got.view(np.float32)[0]).all()                    # the NaN-scaled column


def test_sparse_selects_fmaps_by_tag():
    rng = np.random.default_rng(SEED)
    k, f, m, n = 12, 3, 4, 5
    st = codes(rng, Dtype.FP16, Gen.MARIANA, (k, m), special=False)
    mv = codes(rng, Dtype.FP16, Gen.MARIANA, (k, f, n), special=False)
    tags = rng.integers(0, f, (k, m))
    got = matmul(st, mv, in_dtype="fp16", gen="mariana", tags=tags).view(np.uint32)
    a = dt.to_fp32(mv, "fp16", "mariana")
    w = dt.to_fp32(st, "fp16", "mariana")
    for c in range(m):
        col = softfloat_chain(w[:, c:c + 1], a[np.arange(k), tags[:, c], :])
        np.testing.assert_array_equal(got[c], col[0])


def test_transpose_moves_bits():
    mv = np.array([[0x7FA1, 0x0001], [0xFFFF, 0x8000], [0x1234, 0x7C00]], np.uint16)
    out = matmul(None, mv, in_dtype="fp16", gen="mariana", xpose=True)
    assert out.dtype == np.uint32 and out.shape == (2, 3)
    assert out.tolist() == [[0x7FA1, 0xFFFF, 0x1234], [0x0001, 0x8000, 0x7C00]]
    fp8 = matmul(None, np.array([[0xFF]], np.uint8), in_dtype="fp8_e4m3", gen="mariana", xpose=True)
    assert fp8.tolist() == [[0xFF]]                                  # zero-extended, NaN kept


def test_partials_are_the_row_by_row_chain():
    rng = np.random.default_rng(SEED)
    st, mv = codes(rng, Dtype.BFLOAT16, Gen.MAVERICK, (8, 3)), codes(rng, Dtype.BFLOAT16, Gen.MAVERICK, (8, 4))
    out, steps = matmul(st, mv, in_dtype="bf16", gen="maverick", partials=True)
    assert len(steps) == 8
    np.testing.assert_array_equal(steps[-1].view(np.uint32), out.view(np.uint32))
    first = matmul(st[:1], mv[:1], in_dtype="bf16", gen="maverick")
    np.testing.assert_array_equal(steps[0].view(np.uint32), first.view(np.uint32))


def test_bad_arguments_are_clear():
    with pytest.raises(ValueError, match="cannot mix"):
        matmul(np.zeros((2, 2), np.uint32), np.zeros((2, 2), np.uint16), in_dtype="bf16",
               stationary_dtype="fp32", gen="mariana")
    with pytest.raises(ValueError, match="fp32_mode"):
        matmul(np.zeros((2, 2), np.uint32), np.zeros((2, 2), np.uint32), in_dtype="fp32", gen="mariana")
    with pytest.raises(ValueError, match="share K"):
        matmul(np.zeros((3, 2), np.uint16), np.zeros((2, 2), np.uint16), in_dtype="bf16", gen="mariana")
    with pytest.raises(ValueError, match="not a matmul input"):
        matmul(np.zeros((2, 2), np.uint8), np.zeros((2, 2), np.uint8), in_dtype="int8", gen="mariana")
    with pytest.raises(ValueError, match="multiple of 32"):
        matmul(np.zeros((8, 2), np.uint8), np.zeros((8, 2), np.uint8), in_dtype="fp8_e4m3", gen="maverick",
               perf_mode="quad_row", stationary_scales=np.zeros((1, 2)), moving_scales=np.zeros((1, 2)))
    with pytest.raises(ValueError, match="double_row needs FP8"):
        matmul(np.zeros((2, 2), np.uint16), np.zeros((2, 2), np.uint16), in_dtype="bf16", gen="mariana",
               perf_mode="double_row")
