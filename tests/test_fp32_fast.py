"""The fp32 modes' compiled fmaf chains (model/fma_kernels.py via fastpaths.fp32_chain) against
Berkeley SoftFloat's f32_mulAdd: random patterns, planted double-rounding ties, subnormal and
overflowing sums, signed zeros, Inf / NaN; the per-row partial sums; a direct column_chain call."""
import numpy as np
import pytest

from tensore.model import dtypes as dt
from tensore.model.array import column_chain, matmul
from tests.fixtures import fp32_bits
from tests.oracles import softfloat_chain

K, M, N = 16, 5, 24
SPECIALS = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 2.0 ** -149, -(2.0 ** -149), 2.0 ** -126,
                       3.4e38, -3.4e38, 2.0 ** -75, -(2.0 ** -75), 1.0, -1.0])


def _canonical(bits):
    bits = np.asarray(bits, np.uint32)
    nan = ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x7FFFFF) != 0)
    return np.where(nan, np.uint32(0x7FC00000), bits)


def _ties(rng, w, a):
    """Rows 0-1 where a float64 add then an fp32 cast rounds twice wrongly: row 0 sets odd sums near
    1, row 1 adds 2^-24 (1 + x 2^-23)(1 - x 2^-23), just below half an ulp (its float64 sum is the tie)."""
    x = float(rng.integers(1, 1 << 7))
    w[0], a[0] = 1 + (2 * rng.integers(0, 1 << 20, w.shape[1]) + 1) * 2.0 ** -23, 1.0
    w[1], a[1] = 2.0 ** -24 * (1 + x * 2.0 ** -23), 1 - x * 2.0 ** -23


def _hi_ties(rng, w, a):
    """Rows 0-1 with hi parts only: psum +-2^-60, then (1 + u 2^-12)(1 + v 2^-12) with u, v odd, an fp32
    midpoint in [1, 2): the fused sum rounds toward the psum's sign, float64 then fp32 to even."""
    w[0], a[0] = 2.0 ** -30, rng.choice([-1.0, 1.0], a.shape[1]) * 2.0 ** -30
    w[1] = 1 + (2 * rng.integers(0, 64, w.shape[1]) + 1) * 2.0 ** -12
    a[1] = 1 + (2 * rng.integers(0, 64, a.shape[1]) + 1) * 2.0 ** -12


def _operands(kind: str, seed: int):
    """fp32 w [K, M], a [K, N] of one kind: normal data with ties of full or of hi products, a wide
    exponent range (products below fp32's normal range, sums overflowing), random bit patterns with
    specials, or tiny values (subnormal sums, signed zeros)."""
    rng = np.random.default_rng(seed)
    w, a = rng.standard_normal((K, M)), rng.standard_normal((K, N))
    if kind == "ties":
        _ties(rng, w, a)
    elif kind == "hi_ties":
        _hi_ties(rng, w, a)
    elif kind == "wide":
        w *= np.exp2(rng.integers(-90, 90, (K, M)))
        a *= np.exp2(rng.integers(-90, 90, (K, N)))
    elif kind == "tiny":                                  # products at and below 2^-149: underflow to +-0
        w *= 2.0 ** -70
        a *= 2.0 ** -70
        a[::3] *= 2.0 ** 12
        a[:, :6] *= 2.0 ** -20
    w, a = w.astype(np.float32), a.astype(np.float32)
    if kind == "bits":
        w = rng.integers(0, 1 << 32, (K, M), dtype=np.uint64).astype(np.uint32).view(np.float32)
        a = rng.integers(0, 1 << 32, (K, N), dtype=np.uint64).astype(np.uint32).view(np.float32)
        w[rng.random((K, M)) < 0.1] = rng.choice(SPECIALS, 1)
        a[rng.random((K, N)) < 0.1] = rng.choice(SPECIALS, 1)
        w[:, 0], a[:, 0] = rng.choice(SPECIALS, K), rng.choice(SPECIALS, K)
    return w, a


def _want(w, a, mode):
    """SoftFloat's chain of the mode's passes (D-12): moving x stationary hi*hi, hi*lo, lo*hi, lo*lo."""
    if mode == "high":
        return _canonical(softfloat_chain(w, a))
    (wh, wl), (ah, al) = dt.split_fp32(w), dt.split_fp32(a)
    if mode == "low":
        return _canonical(softfloat_chain(wh, ah))
    return _canonical(softfloat_chain(np.stack([wh, wl, wh, wl], 1).reshape(-1, w.shape[1]),
                                      np.stack([ah, ah, al, al], 1).reshape(-1, a.shape[1])))


@pytest.mark.parametrize("mode", ["low", "high", "low_high"])
@pytest.mark.parametrize("kind,seed", [("ties", 1), ("hi_ties", 7), ("wide", 2), ("bits", 3), ("tiny", 4)])
def test_fp32_modes_match_softfloat(mode, kind, seed):
    w, a = _operands(kind, seed)
    got = fp32_bits(matmul(w.view(np.uint32), a.view(np.uint32), in_dtype="fp32", gen="maverick", fp32_mode=mode))
    assert np.array_equal(got, _want(w, a, mode))


def test_the_data_needs_a_fused_rounding():
    """The tie rows round differently through float64 then fp32; the tiny data ends in signed zeros and
    subnormals; the wide data overflows and has products below fp32's normal range."""
    for kind, seed in (("ties", 1), ("hi_ties", 7)):
        w, a = (dt.split_fp32(x)[0] for x in _operands(kind, seed)) if kind == "hi_ties" else _operands(kind, seed)
        naive = (np.outer(w[0], a[0]).astype(np.float32).astype(float) + np.outer(w[1], a[1].astype(float)))
        assert (fp32_bits(naive.astype(np.float32)) != softfloat_chain(w[:2], a[:2])).mean() > 0.2
    tiny = softfloat_chain(*_operands("tiny", 4))
    assert (tiny == 0x80000000).any() and (tiny == 0).any() and ((tiny & 0x7F800000) == 0).sum() > (tiny == 0).sum() + 10
    w, a = _operands("wide", 2)
    products = np.abs(w.astype(float)[:, :, None] * a.astype(float)[:, None, :])
    assert (softfloat_chain(w, a) & 0x7FFFFFFF == 0x7F800000).any() and (products < 2.0 ** -126).mean() > 0.02


@pytest.mark.parametrize("mode", ["low", "high", "low_high"])
def test_partials_are_the_prefix_chains(mode):
    """partials: the psum after each row is the chain of that row's prefix."""
    w, a = _operands("ties", 5)
    final, steps = matmul(w.view(np.uint32), a.view(np.uint32), in_dtype="fp32", gen="maverick",
                          fp32_mode=mode, partials=True)
    assert len(steps) == K and np.array_equal(fp32_bits(steps[-1]), fp32_bits(final))
    for r in (0, 1, 7):
        assert np.array_equal(fp32_bits(steps[r]), _want(w[:r + 1], a[:r + 1], mode))


def test_column_chain_without_a_mode_fuses_fp32_products():
    """column_chain on fp32 values with no fp32 mode (48-bit products) is HIGH's chain."""
    w, a = _operands("ties", 6)
    got = column_chain(w[:, None, :].astype(np.float64), a[:, None, :].astype(np.float64), sig_bits=48)
    assert np.array_equal(fp32_bits(got), _want(w, a, "high"))
