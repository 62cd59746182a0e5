"""model.array fast paths (float64 rank-1 chains with tie repair, exact float64 multi-term rows)
against SoftFloat and Fraction oracles; partial sums of 1-row / 1-column / 1-vector matmuls."""
import numpy as np
import pytest

from tensore.model import dtypes as dt
from tensore.model.array import _exact_f64, _wide_ok, matmul
from tests.oracles import fused_chain_oracle, softfloat_chain


def _fp32_ties(rng, k, m, n):
    """fp32 operands where float64-then-fp32 double rounding goes wrong: row 0 sets odd sums S near 1,
    row 1 adds 2^-24 (1 + x 2^-23)(1 - x 2^-23) = half an ulp minus x^2 2^-70 (a float64 sum lands
    on the tie; the exact sum is below it); further rows are random."""
    x = float(rng.integers(1, 1 << 7))          # x^2 2^-70 below float64's half ulp at 1
    w = rng.standard_normal((k, m))
    a = rng.standard_normal((k, n))
    w[0], a[0] = 1 + (2 * rng.integers(0, 1 << 20, m) + 1) * 2.0 ** -23, 1.0
    w[1], a[1] = 2.0 ** -24 * (1 + x * 2.0 ** -23), 1 - x * 2.0 ** -23
    a[1, ::3] = 1 - rng.integers(1, 1 << 20, a[1, ::3].size) * 2.0 ** -23
    return w.astype(np.float32), a.astype(np.float32)


def test_fp32_high_ties_match_softfloat():
    w, a = _fp32_ties(np.random.default_rng(5), 12, 6, 40)
    assert _wide_ok([w.astype(float)], [a.astype(float)])
    got = matmul(w.view(np.uint32), a.view(np.uint32), in_dtype="fp32", gen="maverick", fp32_mode="high")
    want = softfloat_chain(w, a)
    assert np.array_equal(got.view(np.uint32), want)
    naive = np.outer(w[0], a[0]).astype(np.float32)  # float64 add then fp32 cast: double rounding
    naive = (naive.astype(float) + np.outer(w[1].astype(float), a[1].astype(float))).astype(np.float32)
    assert (naive.view(np.uint32) != softfloat_chain(w[:2], a[:2])).any(), "the data must exercise the tie repair"


@pytest.mark.parametrize("mode", ["low", "low_high"])
def test_fp32_split_modes_match_softfloat(mode):
    w, a = _fp32_ties(np.random.default_rng(6), 8, 5, 24)
    got = matmul(w.view(np.uint32), a.view(np.uint32), in_dtype="fp32", gen="maverick", fp32_mode=mode)
    wh, wl = dt.split_fp32(w)
    ah, al = dt.split_fp32(a)
    if mode == "low":
        want = softfloat_chain(wh, ah)
    else:                  # four fused adds per row: hi*hi, hi*lo, lo*hi, lo*lo (moving * stationary)
        ww = np.stack([wh, wl, wh, wl], 1).reshape(-1, w.shape[1])
        aa = np.stack([ah, ah, al, al], 1).reshape(-1, a.shape[1])
        want = softfloat_chain(ww, aa)
    assert np.array_equal(got.view(np.uint32), want)


@pytest.mark.parametrize("scale", [1.0, 2.0 ** 12])
def test_double_row_matches_fraction_oracle(scale):
    """E5M2 double row: a narrow range takes the exact float64 path, a wide one the fused_sum path."""
    rng = np.random.default_rng(7)
    k, m, n = 16, 5, 9
    x = rng.standard_normal((k, m)) * rng.choice([1.0, scale, 1 / scale], (k, m))
    y = rng.standard_normal((k, n)) * rng.choice([1.0, scale, 1 / scale], (k, n))
    wc = dt.from_fp32(x.astype(np.float32), "fp8_e5m2", "cayman")
    ac = dt.from_fp32(y.astype(np.float32), "fp8_e5m2", "cayman")
    wv, av = (dt.to_fp32(c, "fp8_e5m2", "cayman").astype(float).reshape(k // 2, 2, -1) for c in (wc, ac))
    assert _exact_f64(wv, av) == (scale == 1.0)
    got = matmul(wc, ac, in_dtype="fp8_e5m2", gen="cayman", perf_mode="double_row")
    assert np.array_equal(got.view(np.uint32), fused_chain_oracle(wv, av))


@pytest.mark.parametrize("spread", [2, 40], ids=["packed-path", "row-sum-path"])
def test_mx_matches_fraction_oracle(spread):
    """Narrow scales: every partial sum exact in float64; wide ones: exact row sums + tie repair."""
    rng = np.random.default_rng(8)
    k, m, n = 64, 4, 6
    wc = dt.from_fp32(rng.standard_normal((k, m)).astype(np.float32), "fp8_e4m3", "maverick")
    ac = dt.from_fp32(rng.standard_normal((k, n)).astype(np.float32), "fp8_e4m3", "maverick")
    sw, sa = (rng.integers(127 - spread, 128 + spread, (k // 32, x)) for x in (m, n))
    got = matmul(wc, ac, in_dtype="fp8_e4m3", gen="maverick", perf_mode="quad_row",
                 stationary_scales=sw, moving_scales=sa)
    wv, av = (dt.to_fp32(c, "fp8_e4m3", "maverick").astype(float).reshape(k // 4, 4, -1) for c in (wc, ac))
    blk = np.arange(k // 4) * 4 // 32
    scales = ((sw - 127.0)[blk], (sa - 127.0)[blk])
    scaled = [v * np.exp2(sc)[:, None, :] for v, sc in zip((wv, av), scales)]
    assert _exact_f64(*scaled) == (spread == 2)
    assert np.array_equal(got.view(np.uint32), fused_chain_oracle(wv, av, scales))


@pytest.mark.parametrize("shape", [(6, 1, 5), (6, 4, 1), (6, 1, 1), (1, 3, 4)],
                         ids=["one-column", "one-vector", "one-by-one", "one-row"])
@pytest.mark.parametrize("dtype,mode", [("bf16", None), ("fp32", "high"), ("fp32", "low_high")])
def test_partials_of_thin_matmuls(shape, dtype, mode):
    """Each row's partial sum is the matmul of the rows so far (the M == 1 / N == 1 aliasing bug)."""
    k, m, n = shape
    rng = np.random.default_rng(9)
    w32, a32 = rng.standard_normal((k, m)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    if dtype == "fp32":
        w, a = w32.view(np.uint32), a32.view(np.uint32)
    else:
        w, a = dt.from_fp32(w32, dtype, "mariana"), dt.from_fp32(a32, dtype, "mariana")
    kw = dict(in_dtype=dtype, gen="mariana", fp32_mode=mode)
    final, steps = matmul(w, a, partials=True, **kw)
    assert len(steps) == k
    for r in range(k):
        assert np.array_equal(steps[r].view(np.uint32), matmul(w[:r + 1], a[:r + 1], **kw).view(np.uint32)), r
    assert np.array_equal(steps[-1].view(np.uint32), final.view(np.uint32))


def test_sparse_matches_fraction_oracle():
    """MatmulSparse's float32 fast path: dst[c, n] = chain over r of W[r, c] * moving[r, tag[r, c], n]."""
    rng = np.random.default_rng(10)
    k, f, m, n = 12, 3, 5, 7
    wc = dt.from_fp32(rng.standard_normal((k, m)).astype(np.float32), "fp16", "mariana")
    ac = dt.from_fp32(rng.standard_normal((k, f, n)).astype(np.float32), "fp16", "mariana")
    tags = rng.integers(0, f, (k, m))
    got = matmul(wc, ac, in_dtype="fp16", gen="mariana", tags=tags)
    wv, av = dt.to_fp32(wc, "fp16", "mariana").astype(float), dt.to_fp32(ac, "fp16", "mariana").astype(float)
    for c in range(m):
        col = fused_chain_oracle(wv[:, c].reshape(k, 1, 1), av[np.arange(k), tags[:, c]][:, None, :])
        assert np.array_equal(got[c].view(np.uint32), col[0]), c
