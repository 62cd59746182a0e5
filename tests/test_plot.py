"""Pictures: every view renders a PNG; the PE-busy curve accounts for every PE-cycle of the matmuls."""
import numpy as np

from tensore import plot
from tensore.kernels import gemm as G
from tensore.kernels.estimate import estimate, format_estimate, matmul_spans


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


def _conv_run():
    from tensore.kernels.conv import conv2d
    rng = np.random.default_rng(4)
    prog = conv2d(rng.standard_normal((1, 8, 5, 6)), rng.standard_normal((4, 8, 3, 3)), stride=2, pad=1,
                  gen="cayman", rows=8, cols=8)
    C, trace, _ = G.run(prog, trace="aggregate")
    return prog, trace, C


def test_figures_name_the_engine_and_tick_integers():
    """Every view of a convolution: integer tick locators on its integer axes, the generation in the
    titles, output pixels / channels on the error heatmap (figure objects, not pixels)."""
    from matplotlib.ticker import MaxNLocator
    prog, trace, C = _conv_run()
    fig = plot.dashboard_figure(prog, trace, C)
    try:
        assert "CAYMAN 8 x 8" in fig._suptitle.get_text()
        timeline, util, psum, heat = fig.axes[:4]
        for ax in (timeline, util, psum, heat):
            assert "CAYMAN" in ax.get_title(), ax.get_title()
            loc = ax.xaxis.get_major_locator()
            assert isinstance(loc, MaxNLocator) and loc._integer, ax.get_title()
        assert isinstance(heat.yaxis.get_major_locator(), MaxNLocator) and heat.yaxis.get_major_locator()._integer
        assert heat.get_xlabel() == "output channel" and heat.get_ylabel().startswith("output pixel")
        assert plot.ERROR_LABEL in fig.axes[4].get_ylabel()                 # the colorbar
    finally:
        plot.plt.close(fig)
    prog, trace, C = _run(gen="mariana")
    fig = plot.single_figure("error", prog, trace, C)
    assert fig.axes[0].get_xlabel().startswith("n") and fig.axes[0].get_ylabel().startswith("m")
    plot.plt.close(fig)


def test_tie_of_compute_and_partial_tiles_is_named():
    """K = 4 on 8 rows: the matmul streams at half the PEs, so partial tiles cost as much as the
    compute; the bound text says they tie instead of "bound by compute" at 37%."""
    rng = np.random.default_rng(0)
    prog = G.gemm(rng.standard_normal((64, 4)), rng.standard_normal((4, 8)), gen="mariana", rows=8, cols=8)
    C, trace, _ = G.run(prog, trace="aggregate")
    e = estimate(prog, trace)
    assert e["breakdown"]["compute"] == e["breakdown"]["partial tiles"] and e["utilisation"] < 0.5
    assert e["bound_text"].startswith("compute and partial tiles tie") and "50% of the PEs busy" in e["bound_text"]
    assert e["bound_text"] in format_estimate(e)
    fig = plot.single_figure("pe", prog, trace, C)
    assert "compute and partial tiles tie" in fig.axes[0].get_title()
    plot.plt.close(fig)


def test_error_heatmap_draws_exact_cells_apart_with_a_legend():
    """Exact cells (error 0) are masked and drawn in plot.EXACT_COLOUR, not the colour scale's
    bottom, and a legend names them."""
    import matplotlib.colors as mcolors

    from tensore.kernels import numerics
    prog, _, C = _run(gen="mariana")
    e = numerics.componentwise(prog, C)
    assert (e == 0).any() and (e > 0).any()
    fig, ax = plot.plt.subplots()
    plot.error_heatmap(prog, C, ax, fig)
    im = ax.images[0]
    data = im.get_array()
    assert np.array_equal(np.ma.getmaskarray(data), e == 0)
    bad = im.cmap.get_bad()
    assert np.allclose(bad, mcolors.to_rgba(plot.EXACT_COLOUR))
    assert not np.allclose(bad, im.cmap(0.0))                 # not the scale's bottom colour
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts == [f"exact (error 0): {int((e == 0).sum()):,} of {e.size:,}"]
    plot.plt.close(fig)
