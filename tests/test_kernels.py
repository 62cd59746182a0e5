"""GEMM and convolution kernels: programs on the golden engine against numpy float64 and the exact
contract (model.array.matmul per K slice + PSUM rules), tiling and scheduling properties, the RTL in
lockstep at small sizes, numerics report and cycle estimate."""
import numpy as np
import pytest

from tensore.model.isa.enums import Opcode
from tensore.kernels import conv as Cv
from tensore.kernels import gemm as G
from tensore.kernels import numerics as Nm
from tensore.kernels.estimate import estimate

SMALL = {"cayman": (8, 8), "mariana": (8, 8), "maverick": (8, 16)}
TOL = {"bf16": 2e-2, "fp16": 2e-3, "fp8_e4m3": 2e-1, "fp8_e5m2": 3e-1, "fp32": 1e-5}


def _operands(seed, m, k, n):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)), rng.standard_normal((k, n))


def _check(prog, C, tol=None):
    """Bit-exact against the contract; near float64 of the quantised inputs."""
    assert np.array_equal(C.view(np.uint32), Nm.contract(prog).view(np.uint32))
    ref = Nm.reference64(prog)
    scale = prog.a_codes.shape[1] ** 0.5
    if tol is not None:
        assert np.abs(C - ref).max() <= tol * scale


CASES = [("cayman", "bf16", {}), ("cayman", "fp16", {}), ("cayman", "fp8_e4m3", {}),
         ("cayman", "fp8_e5m2", {"double_row": True}), ("cayman", "fp32", {"fp32_mode": "high"}),
         ("mariana", "bf16", {}), ("mariana", "fp8_e4m3", {"double_row": True}),
         ("mariana", "fp32", {"fp32_mode": "low_high"}), ("mariana", "bf16", {"out_dtype": "bf16"}),
         ("mariana", "fp16", {"out_dtype": "bf16", "rounding": "sr"}),
         ("maverick", "bf16", {}), ("maverick", "fp8_e5m2", {}), ("maverick", "fp32", {"fp32_mode": "low"}),
         ("maverick", "bf16", {"out_dtype": "bf16", "rounding": "sr"})]


@pytest.mark.parametrize("gen,dtype,kw", CASES, ids=[f"{g}-{d}-{'-'.join(map(str, k.values()))}" for g, d, k in CASES])
def test_gemm_random_shapes(gen, dtype, kw):
    """Shapes that are not multiples of the tiles: several K, N and M tiles, partial tiles."""
    rows, cols = SMALL[gen]
    for i, (m, k, n) in enumerate([(13, 21, 11), (1, 9, 3), (40, 8, 17)]):
        A, B = _operands(100 + i, m, k, n)
        prog = G.gemm(A, B, dtype=dtype, gen=gen, rows=rows, cols=cols, **kw)
        C, trace, _ = G.run(prog)
        assert C.shape == (m, n) and not np.isnan(C).any()
        bf16_out = kw.get("out_dtype") == "bf16"
        _check(prog, C, None if bf16_out else TOL[dtype])
        if bf16_out:
            assert np.abs(C - Nm.reference64(prog)).max() <= 0.05 * k ** 0.5


@pytest.mark.parametrize("mx,dtype", [("quad_row", "fp8_e4m3"), ("oct_row", "fp8_e5m2"), ("quad_row", "fp8_e3m4")])
def test_gemm_mx(mx, dtype):
    """MX blocks (OCP scales) on MARIANA's LdweightsMX / MatmulMX: K padded to whole blocks."""
    from tensore.kernels import mx as mxq
    A, B = _operands(20, 21, 70, 9)
    prog = G.gemm(A, B, dtype=dtype, mx=mx, gen="mariana", rows=8, cols=8)
    assert prog.a_codes.shape == (21, 96) and prog.b_scales.shape == (3, 9) and prog.macs == 21 * 70 * 9
    assert "matmul_mx" in prog.text and "ldweights_mx" in prog.text
    C, trace, _ = G.run(prog)
    _check(prog, C)
    # the OCP quantisation: each block's largest element keeps the format's top binade
    v = mxq.values(prog.b_codes, prog.b_scales, dtype, "mariana")
    assert np.abs(v[:70] - B).max() <= 0.13 * np.abs(B).max()
    assert np.abs(C - A @ B).max() <= 0.1 * np.abs(A @ B).max()


@pytest.mark.parametrize("gen", ["cayman", "mariana", "maverick"])
def test_gemm_2of4_sparse(gen):
    """2:4 pruned weights through LdTags + MatmulSparse: the pruned product, bit-exact to the contract."""
    from tensore.kernels import sparse as sp
    A, B = _operands(21, 30, 37, 11)
    rows, cols = SMALL[gen]
    prog = G.gemm(A, B, gen=gen, rows=rows, cols=cols, sparse=True)
    assert "matmul_sparse" in prog.text and "ldtags" in prog.text and prog.macs == 30 * 11 * 37 // 2
    bp = G.values(prog.b_codes, "bf16", gen)
    nz = (bp.reshape(-1, 4, 11) != 0).sum(axis=1)
    assert nz.max() <= 2 and (bp[:37] != 0).sum() == 2 * 9 * 11 + 11        # the last group holds one
    bq = G.values(G.quantise(B, "bf16", gen), "bf16", gen)
    kept = bp[:37] != 0
    assert np.array_equal(bp[:37][kept], bq[kept])
    big = np.sort(np.abs(bq[:36]).reshape(9, 4, 11), axis=1)[:, 2:]      # the two largest of each group
    assert np.array_equal(np.sort(np.abs(bp[:36]).reshape(9, 4, 11), axis=1)[:, 2:], big)
    C, trace, _ = G.run(prog)
    _check(prog, C, 2e-2)
    # tag words: physical columns reversed (LdTags loads last column first), larger logical column low
    assert np.array_equal(sp.tag_words(np.array([[1, 2, 3, 0, 1]])), np.array([[0x1032, 0x1000]], np.uint16))


def test_gemm_tiling_and_groups():
    """K = 3 tiles, N = 2 tiles, M = 3 tiles of 512 fp32 cells: one group per output tile,
    MULTI_START / MID / END in order, one weight load per (N tile, chunk, K tile)."""
    A, B = _operands(1, 1100, 20, 12)
    prog = G.gemm(A, B, gen="mariana", rows=8, cols=8, psum_banks=4)
    lines = prog.text.splitlines()
    assert sum(line.startswith("ldweights") for line in lines) == 2 * 3
    mm = [line for line in lines if line.startswith("matmul")]
    assert len(mm) == 2 * 3 * 3 and len(prog.tiles) == 6
    for t in prog.tiles:
        group = [lines[i] for i in range(t.first_op, t.last_op + 1) if f"psum(0,{t.bank},0)" in lines[i]]
        assert [g.split("acc=")[1].split()[0] for g in group] == ["multi_start", "multi_mid", "multi_end"]
    C, trace, _ = G.run(prog)
    _check(prog, C, 2e-2)


def test_psum_bank_reuse_and_rotation():
    """More output tiles than banks: banks are reused in rotation and each tile still reads right."""
    A, B = _operands(2, 600, 12, 20)
    prog = G.gemm(A, B, gen="cayman", rows=8, cols=8, psum_banks=1)
    assert [t.bank for t in prog.tiles] == [i % 8 for i in range(len(prog.tiles))]
    assert len(prog.tiles) == 2 * 3 > 0
    C, trace, _ = G.run(prog)
    _check(prog, C, 2e-2)
    A, B = _operands(3, 5000, 8, 16)                  # 10 M tiles x 2 N tiles: banks reused
    prog = G.gemm(A, B, gen="cayman", rows=8, cols=8, psum_banks=4)
    C, trace, _ = G.run(prog)
    _check(prog, C, 2e-2)
    ps = estimate(prog, trace)["psum"]
    assert ps["reuses"] == len(prog.tiles) - 8 and ps["min_drain_window"] > 0


def test_maverick_c256_tiles():
    """MAVERICK N tiles of the full width (c256: the upper half in the next bank) and a c128 rest."""
    A, B = _operands(4, 30, 10, 40)
    prog = G.gemm(A, B, gen="maverick", rows=8, cols=16)
    assert [(t.n, t.banks) for t in prog.tiles] == [(16, 2), (16, 2), (8, 1)]
    assert "col_size_log2=c256" in prog.text and "num_elem=[30,1,2]" in prog.text
    C, trace, _ = G.run(prog)
    _check(prog, C, 2e-2)


def test_shadow_weights_hide_the_loads():
    """With M tiles longer than the array's fill (R + C), every weight load overlaps a matmul."""
    A, B = _operands(5, 64, 64, 8)
    prog = G.gemm(A, B, gen="mariana", rows=8, cols=8)
    C, trace, _ = G.run(prog)
    est = estimate(prog, trace)
    assert est["weight_loads"] == 8 and est["breakdown"]["weight loads"] == 0
    assert est["breakdown"]["partial tiles"] == 0
    assert sum(est["breakdown"].values()) == pytest.approx(est["cycles"])
    assert est["ideal_cycles"] == 64 * 64 * 8 / 64 and est["utilisation"] > 0.75
    lw = [o.t_issue for o in trace.ops if o.desc.op == Opcode.LDWEIGHTS]
    mm = [(o.t_issue, o.t_complete) for o in trace.ops if o.desc.op == Opcode.MATMUL]
    assert all(any(s < t < e for s, e in mm) for t in lw[1:])      # loads issue while a matmul runs


@pytest.mark.parametrize("gen,rows,cols,kw", [("mariana", 4, 4, {}), ("maverick", 4, 8, {}),
                                              ("cayman", 4, 4, {"dtype": "fp32", "fp32_mode": "high"})])
def test_estimate_and_plots_on_an_aggregate_trace(gen, rows, cols, kw, tmp_path):
    """An aggregate trace (model/trace.py) gives the estimate and the pictures of a detailed one
    without expanding a PSUM write into an Event: 9 N tiles x 3 K tiles, banks reused (MAVERICK: c256
    tiles, fp32 HIGH: 4 passes); the write spans against the detailed trace's events."""
    from tensore import plot
    from tensore.kernels.estimate import write_spans
    A, B = _operands(12, 5, 10, 9 * cols)
    prog = G.gemm(A, B, gen=gen, rows=rows, cols=cols, **kw)
    (C, detailed, _), (C2, agg, _) = G.run(prog), G.run(prog, trace="aggregate")
    assert np.array_equal(C.view(np.uint32), C2.view(np.uint32)) and len(agg.blocks) == 27
    want = {}
    for e in detailed.events:
        if e.kind == "psum_write":
            want[e.op] = (want.get(e.op, (e.cycle,))[0], e.cycle)
    ops = [o.index for o in detailed.ops]
    assert write_spans(detailed, ops) == write_spans(agg, ops) == want
    est = estimate(prog, agg)
    assert est == estimate(prog, detailed) and est["psum"]["reuses"] > 0
    if gen == "maverick":
        plot.dashboard(prog, detailed, C, tmp_path / "d.png")
        plot.dashboard(prog, agg, C2, tmp_path / "a.png")
        assert (tmp_path / "d.png").read_bytes() == (tmp_path / "a.png").read_bytes()
    assert "events" not in agg.__dict__                     # nothing expanded the blocks


def test_gemm_bad_input():
    A, B = _operands(6, 4, 5, 3)
    with pytest.raises(ValueError, match="share K"):
        G.gemm(A, B[:4], gen="mariana")
    with pytest.raises(ValueError, match="not a matmul input"):
        G.gemm(A, B, dtype="int8", gen="mariana")
    with pytest.raises(ValueError, match="BFLOAT16 from MARIANA"):
        G.gemm(A, B, out_dtype="bf16", gen="cayman")
    with pytest.raises(ValueError, match="fp32-mode"):
        G.gemm(A, B, dtype="fp32", gen="cayman")
    with pytest.raises(ValueError, match="double row"):
        G.gemm(A, B, dtype="bf16", double_row=True, gen="cayman")
    with pytest.raises(ValueError, match="MX kernels"):
        G.gemm(A, B, dtype="fp8_e4m3", mx="quad_row", gen="maverick")
    with pytest.raises(ValueError, match="whole 32-element blocks"):
        G.gemm(A, B, dtype="fp8_e4m3", mx="quad_row", gen="mariana", rows=4, cols=4)
    with pytest.raises(ValueError, match="SBUF partition"):
        G.gemm(np.zeros((70000, 200)), np.zeros((200, 8)), gen="cayman")


def _conv_ref(X, W, s, p, d):
    b, ci, h, w = X.shape
    co, _, kh, kw = W.shape
    ho, wo = (h + 2 * p - d * (kh - 1) - 1) // s + 1, (w + 2 * p - d * (kw - 1) - 1) // s + 1
    Xp = np.pad(X, ((0, 0), (0, 0), (p, p), (p, p)))
    out = np.zeros((b, co, ho, wo))
    for i in range(kh):
        for j in range(kw):
            patch = Xp[:, :, i * d:i * d + s * (ho - 1) + 1:s, j * d:j * d + s * (wo - 1) + 1:s]
            out += np.einsum("bchw,oc->bohw", patch, W[:, :, i, j])
    return out


CONV = [("cayman", (2, 3, 7, 6, 5, 3, 3, 1, 1, 1), "direct"), ("mariana", (1, 20, 9, 11, 10, 3, 2, 2, 1, 2), "direct"),
        ("maverick", (2, 9, 6, 6, 18, 2, 2, 1, 0, 1), "im2col"), ("cayman", (1, 16, 5, 5, 4, 3, 3, 1, 1, 1), "auto"),
        ("mariana", (3, 4, 5, 4, 6, 1, 1, 1, 0, 1), "auto")]


@pytest.mark.parametrize("gen,shape,method", CONV)
def test_conv_against_numpy(gen, shape, method):
    b, ci, h, w, co, kh, kw, s, p, d = shape
    rng = np.random.default_rng(sum(shape))
    X, W = rng.standard_normal((b, ci, h, w)), rng.standard_normal((co, ci, kh, kw))
    rows, cols = SMALL[gen]
    prog = Cv.conv2d(X, W, stride=s, pad=p, dil=d, method=method, gen=gen, rows=rows, cols=cols)
    if method == "auto":            # C_in a multiple of R: direct; a 1x1 kernel: either, direct
        assert prog.method == "direct"
    C, trace, _ = G.run(prog)
    _check(prog, C)
    xq = G.values(G.quantise(X, "bf16", gen), "bf16", gen)
    wq = G.values(G.quantise(W, "bf16", gen), "bf16", gen)
    img = prog.to_image(C)
    assert np.abs(img - _conv_ref(xq, wq, s, p, d)).max() < 1e-5 * ci * kh * kw


def test_conv_auto_choice_and_nhwc():
    rng = np.random.default_rng(12)
    X, W = rng.standard_normal((1, 6, 6, 3)), rng.standard_normal((4, 3, 3, 3))   # NHWC, C_in 3 < R
    prog = Cv.conv2d(X, W, pad=1, layout="nhwc", gen="mariana", rows=8, cols=8)
    assert prog.method == "im2col"
    C, _, _ = G.run(prog)
    ref = _conv_ref(G.values(G.quantise(X.transpose(0, 3, 1, 2), "bf16", "mariana"), "bf16", "mariana"),
                    G.values(G.quantise(W, "bf16", "mariana"), "bf16", "mariana"), 1, 1, 1)
    assert np.abs(prog.to_image(C) - ref.transpose(0, 2, 3, 1)).max() < 1e-4
    with pytest.raises(ValueError, match="direct convolution cannot"):
        Cv.conv2d(X.transpose(0, 3, 1, 2), W, gen="cayman", dtype="fp8_e4m3", double_row=True, method="direct")
    with pytest.raises(ValueError, match="input channels"):
        Cv.conv2d(X, W[:, :2], layout="nhwc", gen="cayman")


def test_numerics_report():
    A, B = _operands(7, 20, 30, 10)
    prog = G.gemm(A, B, gen="mariana", rows=8, cols=8)
    C, _, _ = G.run(prog)
    rep = Nm.report(prog, C)
    assert rep["bit_exact"] and sum(rep["ulp_hist"]) == C.size
    assert rep["max_abs"] == pytest.approx(np.abs(C - Nm.reference64(prog)).max())
    bad = C.copy()
    bad[3, 4] = np.nextafter(bad[3, 4], np.float32(np.inf), dtype=np.float32)
    assert Nm.report(prog, bad)["contract_mismatches"] == 1
    assert "bit-exact" in Nm.format_report(rep)
    assert Nm.ulps(np.float32([1.0]), np.array([1.0 + 2 ** -23 * 3]))[0] == 3


def test_gemm_on_the_rtl_in_lockstep():
    """The same program, unchanged, on the engine RTL (Amaranth simulator) cycle by cycle: three K
    tiles, two N tiles, bf16 cells with stochastic rounding."""
    from tensore.cosim import lockstep
    A, B = _operands(8, 9, 10, 6)
    prog = G.gemm(A, B, gen="mariana", rows=4, cols=4, out_dtype="bf16", rounding="sr")
    assert lockstep.run(prog) is None


@pytest.mark.cosim
def test_more_kernels_on_the_rtl_in_lockstep():
    """Direct convolution (3-D patterns), MAVERICK c256, FP8 double row, MX oct row, 2:4 sparse."""
    from tensore.cosim import lockstep
    A, B = _operands(8, 9, 10, 6)
    assert lockstep.run(G.gemm(A, B, gen="cayman", rows=4, cols=4)) is None
    rng = np.random.default_rng(9)
    prog = Cv.conv2d(rng.standard_normal((1, 4, 5, 5)), rng.standard_normal((3, 4, 2, 2)), stride=2, pad=1,
                     method="direct", gen="mariana", rows=4, cols=4)
    assert lockstep.run(prog) is None
    A, B = _operands(10, 5, 6, 12)
    assert lockstep.run(G.gemm(A, B, gen="maverick", rows=4, cols=8)) is None
    prog = G.gemm(A, B, gen="cayman", dtype="fp8_e4m3", double_row=True, rows=4, cols=4)
    assert lockstep.run(prog) is None
    A, B = _operands(11, 7, 40, 4)
    assert lockstep.run(G.gemm(A, B, gen="mariana", dtype="fp8_e5m2", mx="oct_row", rows=4, cols=4)) is None
    for gen, cols in (("mariana", 4), ("maverick", 8)):
        assert lockstep.run(G.gemm(A, B, gen=gen, dtype="fp16", sparse=True, rows=4, cols=cols)) is None


def test_componentwise_error_is_small_where_the_sum_cancels():
    """C = 1 + 2^-30 - 1: the fp32 chain rounds 1 + 2^-30 to 1 (D-10), so C = 0 against 2^-30.  In
    ulps that is ~8.6e8 (every float between 0 and 2^-30); relative to the terms, |C - C_ref| /
    (u |A| |B|) ~ 2^-30 / (2^-24 * 2) = 2^-7: small and finite, within the dot-product bound."""
    A, B = np.array([[1.0, 2.0 ** -30, -1.0]]), np.ones((3, 1))
    prog = G.gemm(A, B, gen="mariana", rows=4, cols=4)
    C, _, _ = G.run(prog)
    assert C[0, 0] == 0 and Nm.reference64(prog)[0, 0] == 2.0 ** -30
    assert Nm.ulps(C, Nm.reference64(prog)).max() > 10 ** 8                # the old measure
    assert Nm.componentwise(prog, C)[0, 0] == pytest.approx(2.0 ** -7)
    rep = Nm.report(prog, C)
    assert rep["componentwise_max"] == pytest.approx(2.0 ** -7) and "max 0.00781 u |A||B|" in Nm.format_report(rep)
    Z = np.zeros((2, 3))                                                    # all terms 0, C exact: 0
    prog = G.gemm(Z, B, gen="mariana", rows=4, cols=4)
    assert not Nm.componentwise(prog, G.run(prog)[0]).any()


def test_normwise_rel_is_the_frobenius_relative_error():
    """numerics.report's normwise_rel is ||C - R||_F / ||R||_F, not max |C - R| / max |R|."""
    from tensore.kernels import gemm as G
    from tensore.kernels import numerics as N
    rng = np.random.default_rng(3)
    prog = G.gemm(rng.standard_normal((12, 40)), rng.standard_normal((40, 8)), gen="mariana", rows=8, cols=8,
                  out_dtype="bf16")
    C = G.run(prog)[0]
    rep, ref = N.report(prog, C), N.reference64(prog)
    err = C.astype(np.float64) - ref
    assert rep["normwise_rel"] == pytest.approx(np.linalg.norm(err) / np.linalg.norm(ref), rel=1e-12)
    assert rep["normwise_rel"] != pytest.approx(np.abs(err).max() / np.abs(ref).max(), rel=1e-3)
    assert "normwise rel (Frobenius)" in N.format_report(rep)
    assert N.normwise_rel(np.zeros((2, 2)), np.zeros((2, 2))) == 0.0
