"""Pictures: every view renders a PNG; the PE-busy curve accounts for every PE-cycle of the matmuls."""
import numpy as np

from tensore import plot
from tensore.kernels import gemm as G
from tensore.kernels.estimate import matmul_spans


def _run(**kw):
    rng = np.random.default_rng(3)
    prog = G.gemm(rng.standard_normal((40, 20)), rng.standard_normal((20, 12)), rows=8, cols=8, **kw)
    C, trace, _ = G.run(prog)
    return prog, trace, C


def _is_png(path):
    data = path.read_bytes()
    return data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_dashboard_and_single_views(tmp_path):
    prog, trace, C = _run(gen="mariana")
    assert _is_png(plot.dashboard(prog, trace, C, tmp_path / "all.png"))
    for kind in ("timeline", "pe", "psum", "error"):
        plot.single(kind, prog, trace, C, tmp_path / f"{kind}.png")
        assert _is_png(tmp_path / f"{kind}.png"), kind


def test_pe_busy_counts_every_pe_cycle():
    for kw in ({"gen": "cayman"}, {"gen": "maverick", "dtype": "fp32", "fp32_mode": "high"}):
        prog, trace, _ = _run(**kw)
        busy = plot.pe_busy(prog, trace)
        want = sum(r * c * v * prog.passes for _, _, _, _, r, c, v in matmul_spans(prog, trace))
        assert busy.sum() == want
        assert busy.max() <= prog.rows * prog.cols


def test_sweep(tmp_path):
    out = plot.sweep({"bf16": [(8, 0.1), (16, 0.4)], "fp32": [(8, 0.12), (16, 0.5)]}, tmp_path / "s.png")
    assert _is_png(out)
