"""model.array fast paths (float64 rank-1 chains with tie repair, exact float64 multi-term rows)
against SoftFloat and Fraction oracles; partial sums of 1-row / 1-column / 1-vector matmuls."""
import numpy as np
import pytest

from tensore.model import dtypes as dt
from tensore.model import fastpaths as fast
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


# --- D-T75 / D-T76: float32 row sums, dirty cells, sparse GEMM updates, LOW tie suspects ----------

def _e5m2(x):
    return dt.from_fp32(np.asarray(x, np.float32), "fp8_e5m2", "mariana")


def _quad_row(wv, av, sw, sa):
    """The MAVERICK QUAD_ROW E5M2 matmul of values wv [rows, 4, M] and av [rows, 4, N] with E8M0
    scale codes sw, sa."""
    k = wv.shape[0] * wv.shape[1]
    return matmul(_e5m2(wv.reshape(k, -1)), _e5m2(av.reshape(k, -1)), in_dtype="fp8_e5m2", gen="maverick",
                  perf_mode="quad_row", stationary_scales=sw, moving_scales=sa)


def _plant_midpoint_cells(wv, av, cells):
    """Rows 0-1 of cells (i, j): psum 2^-24 after row 0, then a row sum 1.875 + 2^-32 (not an fp32
    value): the exact sum lies just above the midpoint 1.875 + 2^-24, which a rounded row sum hits
    exactly (ties to even: down)."""
    for i, j in cells:
        wv[0, :, i], av[0, :, j] = (2.0 ** -12, 0.0), (2.0 ** -12, 0.0)
        wv[1, :, i], av[1, :, j] = (1.5, 2.0 ** -16), (1.25, 2.0 ** -16)


def _naive_rows(wv, av):
    """The float32 row-sum chain without the dirty-cell fix (what the fix must repair)."""
    p = np.zeros((wv.shape[2], av.shape[2]), np.float32)
    for r in range(wv.shape[0]):
        p = p + np.einsum("ki,kj->ij", wv[r], av[r]).astype(np.float32)
    return p


def test_double_row_dirty_cells_are_recomputed():
    """E5M2 double row with planted wide-span cells (row sums beyond fp32) among random ones: the
    float32 row sums are wrong there, the result matches the Fraction oracle, partials too."""
    rng = np.random.default_rng(11)
    k, m, n = 12, 5, 7
    wv = dt.to_fp32(_e5m2(rng.standard_normal((k, m))), "fp8_e5m2", "mariana").astype(float).reshape(k // 2, 2, m)
    av = dt.to_fp32(_e5m2(rng.standard_normal((k, n))), "fp8_e5m2", "mariana").astype(float).reshape(k // 2, 2, n)
    _plant_midpoint_cells(wv, av, [(1, 2), (3, 5)])
    wc, ac = _e5m2(wv.reshape(k, m)), _e5m2(av.reshape(k, n))
    assert (_naive_rows(wv, av).view(np.uint32) != fused_chain_oracle(wv, av)).any()
    got, steps = matmul(wc, ac, in_dtype="fp8_e5m2", gen="mariana", perf_mode="double_row", partials=True)
    assert np.array_equal(got.view(np.uint32), fused_chain_oracle(wv, av))
    for r in (0, 1, 3):
        assert np.array_equal(steps[r].view(np.uint32), fused_chain_oracle(wv[:r + 1], av[:r + 1])), r


@pytest.mark.parametrize("shift", [0, 55], ids=["unit-scales", "subnormal-products"])
def test_mx_dirty_cells_and_small_scales(shift):
    """QUAD_ROW E5M2 with planted wide-span cells; shift 55 folds 2^-55 into both operands so the
    row sums of the planted cells land in fp32's subnormal range (products still multiples of 2^-149)."""
    rng = np.random.default_rng(12)
    k, m, n = 64, 4, 6
    wv = dt.to_fp32(_e5m2(rng.standard_normal((k, m))), "fp8_e5m2", "maverick").astype(float).reshape(16, 4, m)
    av = dt.to_fp32(_e5m2(rng.standard_normal((k, n))), "fp8_e5m2", "maverick").astype(float).reshape(16, 4, n)
    wv[:2, 2:], av[:2, 2:] = 0.0, 0.0
    _plant_midpoint_cells(wv[:, :2], av[:, :2], [(0, 1), (2, 4)])
    sw, sa = np.full((2, m), 127 - shift), np.full((2, n), 127 - shift)
    got = matmul(_e5m2(wv.reshape(k, m)), _e5m2(av.reshape(k, n)), in_dtype="fp8_e5m2", gen="maverick",
                 perf_mode="quad_row", stationary_scales=sw, moving_scales=sa)
    blk = np.arange(16) * 4 // 32
    want = fused_chain_oracle(wv, av, ((sw - 127.0)[blk], (sa - 127.0)[blk]))
    assert np.array_equal(got.view(np.uint32), want)


def test_mx_dirty_cell_at_the_candidate_limit():
    """QUAD_ROW E5M2, scales 2^0: row 1's four products (three near 3, one 2^-17 of them) sum to a
    value of 25+ bits although X Y = max|w| max|a| / (lsb lsb) is only 2^22.6, between the candidate
    limit 2^24 / pack and 2^24: the cell is dirty (a float32 row sum rounds before psum's 2^-24-ish
    value is added), found as a candidate and recomputed: the Fraction oracle's bits."""
    wv, av = np.zeros((8, 4, 1)), np.zeros((8, 4, 1))
    wv[0, 0, 0], av[0, 0, 0] = 2.0 ** -13 * 1.25, 2.0 ** -12 * 1.75
    wv[1, :, 0], av[1, :, 0] = (1.5, 1.75, 1.75, -0.0546875), (1.75, 1.5, 1.75, 2.0 ** -12 * 1.25)
    sw = sa = np.full((1, 1), 127)
    scales = (np.zeros((8, 1)), np.zeros((8, 1)))
    got = _quad_row(wv, av, sw, sa)
    assert np.array_equal(got.view(np.uint32), fused_chain_oracle(wv, av, scales))
    assert (_naive_rows(wv, av).view(np.uint32) != fused_chain_oracle(wv, av)).any()

def test_mx_nan_scale_makes_its_cells_nan():
    """A NaN E8M0 scale (255) of one stationary block: multi_chain declines, and that column's cells
    are NaN (canonical) while the others match the Fraction oracle."""
    rng = np.random.default_rng(3)
    wv, av = (dt.to_fp32(_e5m2(rng.standard_normal((64, c))), "fp8_e5m2", "maverick").astype(float).reshape(16, 4, c)
              for c in (2, 3))
    sw, sa = np.array([[127, 255], [127, 127]]), np.full((2, 3), 127)
    blk = np.arange(16) * 4 // 32
    scales = tuple(np.where(s == 255, np.nan, s - 127.0)[blk] for s in (sw, sa))
    assert fast.multi_chain(wv, av, scales, False) is None
    got = _quad_row(wv, av, sw, sa)
    want = fused_chain_oracle(wv, av, scales)
    assert np.array_equal(got.view(np.uint32), want) and (want[1] == 0x7FC00000).all()

def test_mx_folded_beyond_fp32_takes_the_float64_path():
    """Scales 2^+121 / 2^-121: the folded stationary values overflow fp32, so multi_chain declines and
    the float64 chain runs; its products are back in range."""
    rng = np.random.default_rng(13)
    k, m, n = 32, 3, 5
    wc = dt.from_fp32(rng.standard_normal((k, m)).astype(np.float32) * 64, "fp8_e4m3", "maverick")
    ac = dt.from_fp32(rng.standard_normal((k, n)).astype(np.float32), "fp8_e4m3", "maverick")
    sw, sa = np.full((1, m), 248), np.full((1, n), 6)
    wv = dt.to_fp32(wc, "fp8_e4m3", "maverick").astype(float).reshape(8, 4, m)
    av = dt.to_fp32(ac, "fp8_e4m3", "maverick").astype(float).reshape(8, 4, n)
    scales = (np.full((8, m), 121.0), np.full((8, n), -121.0))
    assert fast.multi_chain(wv, av, scales, False) is None
    got = matmul(wc, ac, in_dtype="fp8_e4m3", gen="maverick", perf_mode="quad_row",
                 stationary_scales=sw, moving_scales=sa)
    assert np.array_equal(got.view(np.uint32), fused_chain_oracle(wv, av, scales))


@pytest.mark.parametrize("w,scale,bits", [(-1.0, 0, 0x80000000), (1.0, 52, 16)], ids=["2^-254", "2^-150"])
def test_mx_products_below_fp32s_range_round_once(w, scale, bits):
    """Scales whose products fall below fp32's smallest subnormal 2^-149: multi_chain declines (a
    float32 GEMM would round each product alone, to 0); the exact row sums round once: -2^-254
    products sum to -0, four 2^-150 products (each a tie to 0 alone) to 2^-148 a row, 16 x 2^-149."""
    wv, av = np.full((8, 4, 1), w), np.ones((8, 4, 1))
    sw = sa = np.array([[scale]])                                  # 2^(scale - 127) on both sides
    scales = ((sw - 127.0)[np.zeros(8, int)], (sa - 127.0)[np.zeros(8, int)])
    assert fast.multi_chain(wv, av, scales, False) is None
    got = _quad_row(wv, av, sw, sa)
    want = fused_chain_oracle(wv, av, scales)
    assert np.array_equal(got.view(np.uint32), want) and want[0, 0] == bits

def test_sparse_gemm_update_with_zeros_and_subnormals():
    """MatmulSparse's K = F update: zero weights, -0 moving data and products in fp32's subnormal
    range (fp16 subnormals) against the per-column Fraction chain, partials included."""
    rng = np.random.default_rng(14)
    k, f, m, n = 10, 4, 6, 5
    w = rng.standard_normal((k, m)).astype(np.float32)
    a = rng.standard_normal((k, f, n)).astype(np.float32)
    w[::3, 1], a[1, :, 2], a[2, 0] = 0.0, -0.0, 2.0 ** -20
    w[2] *= np.float32(2.0 ** -10)
    wc, ac = dt.from_fp32(w, "fp16", "mariana"), dt.from_fp32(a, "fp16", "mariana")
    tags = rng.integers(0, f, (k, m))
    got, steps = matmul(wc, ac, in_dtype="fp16", gen="mariana", tags=tags, partials=True)
    wv, av = dt.to_fp32(wc, "fp16", "mariana").astype(float), dt.to_fp32(ac, "fp16", "mariana").astype(float)
    for c in range(m):
        sel = av[np.arange(k), tags[:, c]]
        col = fused_chain_oracle(wv[:, c].reshape(k, 1, 1), sel[:, None, :])
        assert np.array_equal(got[c].view(np.uint32), col[0]), c
        assert np.array_equal(steps[3][c].view(np.uint32), fused_chain_oracle(
            wv[:4, c].reshape(4, 1, 1), sel[:4, None, :])[0]), c


def test_bf16_products_in_the_subnormal_range_are_exact():
    """bf16 products below 2^-126 but multiples of 2^-149 take the float32 rank-1 path."""
    rng = np.random.default_rng(15)
    w = (rng.standard_normal((9, 4)) * 2.0 ** -60).astype(np.float32)
    a = (rng.standard_normal((9, 6)) * 2.0 ** -62).astype(np.float32)
    wc, ac = dt.from_fp32(w, "bf16", "mariana"), dt.from_fp32(a, "bf16", "mariana")
    wv, av = dt.to_fp32(wc, "bf16", "mariana"), dt.to_fp32(ac, "bf16", "mariana")
    (_, lw), (_, la) = fast.abs_span(wv), fast.abs_span(av)
    assert lw * la < 2.0 ** -126 and lw * la >= 2.0 ** (16 - 149)
    got = matmul(wc, ac, in_dtype="bf16", gen="mariana")
    assert np.array_equal(got.view(np.uint32), softfloat_chain(wv, av))


def test_fp32_low_tie_after_a_tiny_psum():
    """LOW: psum 2^-60, then hi*hi = (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24, an fp32 midpoint: the exact sum
    is just above it (rounds up), its float64 rounding is the midpoint (ties to even: down)."""
    w = np.array([[2.0 ** -30, 1.0], [1 + 2.0 ** -12, 1.0]], np.float32)
    a = np.array([[2.0 ** -30, 2.0], [1 + 2.0 ** -12, 3.0]], np.float32)
    assert np.float32(np.float64(2.0 ** -60) + (1 + 2.0 ** -12) ** 2) == np.float32(1 + 2.0 ** -11)
    got = matmul(w.view(np.uint32), a.view(np.uint32), in_dtype="fp32", gen="maverick", fp32_mode="low")
    want = softfloat_chain(*(dt.split_fp32(x)[0] for x in (w, a)))
    assert got.view(np.uint32)[0, 0] == np.float32(1 + 2.0 ** -11 + 2.0 ** -23).view(np.uint32)
    assert np.array_equal(got.view(np.uint32), want)


@pytest.mark.parametrize("mode", ["low", "low_high"])
def test_fp32_low_suspect_cells(mode):
    """Tiny operands make products far below the psum (the band checked cell by cell) next to
    random ones and the planted tie data: LOW and LOW_HIGH against SoftFloat."""
    rng = np.random.default_rng(16)
    w, a = _fp32_ties(rng, 10, 5, 16)
    w[4:, 2] *= np.float32(2.0 ** -20)
    a[5:, 3] *= np.float32(2.0 ** -18)
    got = matmul(w.view(np.uint32), a.view(np.uint32), in_dtype="fp32", gen="maverick", fp32_mode=mode)
    (wh, wl), (ah, al) = dt.split_fp32(w), dt.split_fp32(a)
    if mode == "low":
        want = softfloat_chain(wh, ah)
    else:
        want = softfloat_chain(np.stack([wh, wl, wh, wl], 1).reshape(-1, 5),
                               np.stack([ah, ah, al, al], 1).reshape(-1, 16))
    assert np.array_equal(got.view(np.uint32), want)


@pytest.mark.parametrize("values", [[0.0, -3.0, 0.25, -0.0, 7.5], [0.0, -0.0], [], [0.5, float("nan"), -2.0],
                                    [float("-inf"), 2.0 ** -149, 0.0]])
def test_abs_span(values):
    """fastpaths.abs_span against Python's max / min over the magnitudes: min over the non-zero
    ones (+Inf if none), NaN skipped there and returned as the max."""
    mags = [abs(v) for v in values]
    hi, lo = fast.abs_span(np.array(values, np.float32))
    real = [v for v in mags if v == v]
    assert (hi != hi) if len(real) < len(mags) else hi == max(real, default=0.0)
    assert lo == min((v for v in real if v != 0), default=float("inf"))


def test_lsb():
    """fastpaths.lsb against frexp for float32 / float64 (zeros, subnormals, powers of two), arrays
    on either side of the table's 4096 elements; float32 arrays whose low 16 bits are zero but one
    bit (bit 0, or bit 15 with bit 16 clear everywhere) must not read the table."""
    rng = np.random.default_rng(17)
    x = (rng.standard_normal(5000) * np.exp2(rng.integers(-150, 120, 5000))).astype(np.float32)
    x[::11], x[1::13] = 0.0, np.exp2(rng.integers(-149, 127, x[1::13].size))
    bf16 = dt.to_fp32(dt.from_fp32(x, "bf16", "mariana"), "bf16", "mariana")        # the table
    odd = []
    for bit, clear in ((0, 0), (15, 1 << 16)):
        b = bf16.view(np.uint32) & ~np.uint32(clear)
        b[7] |= np.uint32(1 << bit)
        odd.append(b.view(np.float32))
    short = np.ldexp(rng.integers(0, 16, 5000), rng.integers(-60, 60, 5000))     # float64 of 4-bit significands
    last = [np.float32(1 + 2.0 ** -23) * np.ones(5, np.float32), (1 + 2.0 ** -52) * np.ones(5)]    # fraction 1
    for v in (x, x[:3000], x.astype(np.float64), x[:3000].astype(np.float64), bf16, short, *odd, *last,
              rng.standard_normal(50)):
        ref = np.full(v.shape, np.inf)
        nz = v != 0
        mant, e = np.frexp(np.abs(v[nz]).astype(np.float64))
        mi = (mant * 2.0 ** 53).astype(np.int64)
        ref[nz] = np.ldexp((mi & -mi).astype(np.float64), e - 53)
        got = fast.lsb(v)
        assert got.dtype == v.dtype and np.array_equal(got.astype(np.float64), ref)


def test_cell_chain_takes_float64_only_where_it_is_exact():
    """cell_chain's row sums span 80 bits here (1.875 2^50 + 2^-30): float64 rounds them, so its
    guard (2 B < 2^53 q with q the smallest lsb product, here 2^-30) sends the cell to fused_sum,
    whose result (just above a midpoint: up) is the Fraction oracle's; a float64 sum would tie down."""
    wg = np.array([[2.0 ** 38, 2.0 ** 10], [1.5 * 2.0 ** 50, 2.0 ** 10]], np.float32)[:, :, None]
    ag = np.array([[2.0 ** -12, 2.0 ** -40], [1.25, 2.0 ** -40]], np.float32)[:, :, None]
    p, steps = fast.cell_chain(wg, ag, True)
    want = fused_chain_oracle(wg.astype(float), ag.astype(float))[0, 0]
    assert p.view(np.uint32)[0] == want == np.float32(1.875 * 2.0 ** 50).view(np.uint32) + 1
    assert steps.view(np.uint32)[1, 0] == want


def test_cell_chain_keeps_float64_below_half_its_range():
    """Integer terms (q = 1) whose total B = 2^53 - 2^29 + 1 is below 2^53 but not 2^52: three rows
    whose sums land on fp32 ties that round up carry psum 2^30 above the exact running sum, so the
    last add reaches 2^53 + 2^29 + 1, which float64 rounds onto the fp32 midpoint (a tie to 2^53)
    while the exact value rounds up: cell_chain's 2 B < 2^53 q sends it to fused_sum."""
    wg, ag = np.zeros((5, 3, 1), np.float32), np.zeros((5, 3, 1), np.float32)
    wg[0, :2, 0], ag[0, :2, 0] = (2.0 ** 26, 3), (2.0 ** 26, 2.0 ** 28)          # 2^52 + 3 2^28: up
    wg[1:4, 0, 0], ag[1:4, 0, 0] = 3, 2.0 ** 28                                    # + 3 2^28, three times: up
    wg[4, :, 0], ag[4, :, 0] = (2.0 ** 20 - 1, 1, 1), (2.0 ** 32, 2.0 ** 29, 1)    # 2^52 - 2^32 + 2^29 + 1
    p, _ = fast.cell_chain(wg, ag, False)
    want = fused_chain_oracle(wg.astype(float), ag.astype(float))[0, 0]
    assert p.view(np.uint32)[0] == want == np.float32(2.0 ** 53 + 2.0 ** 30).view(np.uint32)


def test_mx_folded_at_fp32s_overflow_bound_is_declined():
    """A folded operand of exactly 2^128 (2.0 with scale 2^127) is not an fp32 value: multi_chain
    declines, and the products (2^128 x 2^-127 = 2) sum as the Fraction oracle says."""
    for side in (0, 1):
        vals, sc = [np.ones((8, 4, 1)), np.ones((8, 4, 1))], [np.full((1, 1), 0), np.full((1, 1), 0)]
        vals[side][:], sc[side][:] = 2.0, 254
        scales = tuple(np.full((8, 1), float(s[0, 0]) - 127) for s in sc)
        assert fast.multi_chain(*vals, scales, False) is None
        got = _quad_row(*vals, *sc)
        assert np.array_equal(got.view(np.uint32), fused_chain_oracle(*vals, scales)), side
        assert got[0, 0] == 64.0


def test_mx_row_sums_beyond_fp32_are_declined():
    """Folded operands in range (1.5 x 2^126, 1.75) whose four products (+-1.3125 x 2^127) could
    pass 2^128 while summed: pack max|w| max|a| >= 2^128, so multi_chain declines (a float32 GEMM
    overflows on the way); each row's exact sum is 0."""
    wv, av = np.tile([1.5, 1.5, -1.5, -1.5], (8, 1))[:, :, None], np.full((8, 4, 1), 1.75)
    sw, sa = np.full((1, 1), 253), np.full((1, 1), 127)
    scales = (np.full((8, 1), 126.0), np.zeros((8, 1)))
    assert fast.multi_chain(wv, av, scales, False) is None
    got = _quad_row(wv, av, sw, sa)
    assert np.array_equal(got.view(np.uint32), fused_chain_oracle(wv, av, scales)) and got[0, 0] == 0

def test_repair_ties_on_a_non_square_psum():
    """repair_ties on psum^T [3, 2] (cells as flat F-order indices): where the float64 add was
    inexact and landed on an fp32 tie (1 + 2^-24 + 2^-60; 2^53 + 2^29 + 1 and 2^53 + 2^30 + 2^29 - 1,
    float64 errors exactly +1 and -1) the cell gets the one rounding; an exact add on a tie
    (2 + 2^-23) keeps the cast's ties-to-even.  Each cell against the Fraction oracle."""
    prev = np.array([[1.0, 2.0], [2.0 ** 53, 1.0], [1.0, 2.0 ** 53 + 2.0 ** 30]], np.float32, order="F")
    term = np.zeros((3, 2), order="F")
    term[2, 0], term[0, 1] = 2.0 ** -24 + 2.0 ** -60, 2.0 ** -23
    term[1, 0], term[2, 1] = 2.0 ** 29 + 1, 2.0 ** 29 - 1
    p32 = np.asfortranarray((prev.astype(np.float64) + term).astype(np.float32))
    cells = np.array([1, 2, 3, 5])                                 # (1, 0), (2, 0), (0, 1), (2, 1) in F order
    fast.repair_ties(p32, prev.ravel(order="F")[cells], cells, lambda jj, ii: term[jj, ii])
    one = np.ones((1, 1, 1))
    want = [[fused_chain_oracle(term[j, i] * one, one, psum0=np.full((1, 1), prev[j, i]))[0, 0] for i in range(2)]
            for j in range(3)]
    assert np.array_equal(p32.view(np.uint32), np.array(want, np.uint32))
    assert p32[2, 0] == np.float32(1 + 2.0 ** -23) and p32[0, 1] == 2.0
    assert p32[1, 0] == 2.0 ** 53 + 2.0 ** 30 and p32[2, 1] == 2.0 ** 53 + 2.0 ** 30


@pytest.mark.parametrize("pack", [2, 4, 8])
def test_dirty_cells_against_brute_force(pack):
    """_dirty_cells names exactly the cells where some row's terms fail sum |t_k| < 2^24 q (q: their
    smallest lsb), over E5M2 values with zeros and a wide range."""
    rng = np.random.default_rng(18 + pack)
    rows, m, n = 64 // pack, 9, 13
    def vals(shape):
        x = rng.standard_normal(shape) * np.exp2(rng.integers(-9, 9, shape))
        return dt.to_fp32(_e5m2(x), "fp8_e5m2", "mariana")
    w, a = vals((rows, pack, m)), vals((rows, pack, n))
    w[w > 40], a[a < -30] = 0.0, 0.0
    (mw, lw), (ma, la) = fast._pack_stats(w), fast._pack_stats(a)
    with np.errstate(over="ignore"):
        ci, cj = fast._dirty_cells(w, a, mw / lw, ma / la, 2.0 ** 24 / pack)
    t = w.astype(float)[:, :, :, None] * a.astype(float)[:, :, None, :]          # [rows, pack, M, N]
    lsb = fast.lsb(w).astype(float)[:, :, :, None] * fast.lsb(a).astype(float)[:, :, None, :]
    want = (np.abs(t).sum(axis=1) >= 2.0 ** 24 * lsb.min(axis=1)).any(axis=0)
    got = np.zeros((m, n), bool)
    got[ci, cj] = True
    assert np.array_equal(got, want) and want.any()
