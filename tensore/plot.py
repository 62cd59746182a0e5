"""Pictures of a kernel run (matplotlib, Agg): a Gantt timeline of the micro-ops per unit, PE
utilisation over time, PSUM bank occupancy, an error heatmap against float64, utilisation sweeps.
Integer axes (cycles, banks, rows / columns, pixels / channels) get integer ticks; titles name the
generation and array; convolutions are drawn on their own axes (output pixels, output channels)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from tensore.model.isa.enums import Opcode  # noqa: E402
from tensore.model.timing import DEFAULT_SBUF_LATENCY  # noqa: E402
from tensore.kernels import estimate as est  # noqa: E402

UNITS = ("weight port", "moving port", "array -> PSUM")


def _integer_ticks(*axes):
    """Ticks at whole numbers only (cycles, indices): MaxNLocator(integer=True) on each axis."""
    for axis in axes:
        axis.set_major_locator(MaxNLocator(integer=True))


def engine_name(prog) -> str:
    """"MARIANA 128 x 128": the generation and the array of a run, for titles."""
    return f"{prog.gen.name} {prog.rows} x {prog.cols}"


def axes_names(prog) -> tuple:
    """(rows of C, columns of C, short tile labels): output pixels / channels for a convolution,
    m / n for a GEMM."""
    if getattr(prog, "out_nchw", None):
        b, _, h, w = prog.out_nchw
        return (f"output pixel (b, y, x) -> b*{h * w} + y*{w} + x", "output channel", ("px", "ch"))
    return ("m (row of C)", "n (column of C)", ("m", "n"))


def run_title(prog, title="") -> str:
    """The figure title: the run's note (or `title`) and the engine it ran on."""
    return f"{title or prog.note} on {engine_name(prog)}"


def timeline(prog, trace, ax):
    """Gantt chart: Ldweights (dark) / LdTags (light) on the weight port (issue to last write), matmuls streaming on
    the moving port (issue + vectors x passes) and their PSUM writes (first to last); colour = tile."""
    first_write = {op: span[0] for op, span in est.write_spans(trace, [o.index for o in trace.ops]).items()}
    tile_of = {op: i for i, t in enumerate(sorted(prog.tiles, key=lambda t: t.first_op)) for op in t.ops}
    colours = plt.get_cmap("tab10")
    bars = {u: [] for u in UNITS}
    for o in trace.ops:
        if o.t_issue is None or o.error:
            continue
        if o.desc.op in est.LOADS:
            shade = "0.7" if o.desc.op == Opcode.LDTAGS else "0.45"
            bars[UNITS[0]].append((o.t_issue, o.t_complete - o.t_issue + 1, shade))
    for op, issue, stream_end, done, _, _, _ in est.matmul_spans(prog, trace):
        c = colours(tile_of.get(op, 0) % 10)
        bars[UNITS[1]].append((issue, stream_end - issue, c))
        bars[UNITS[2]].append((first_write.get(op, issue), done - first_write.get(op, issue) + 1, c))
    for y, unit in enumerate(UNITS):
        if bars[unit]:
            starts, widths, cs = zip(*bars[unit])
            ax.broken_barh(list(zip(starts, widths)), (y - 0.35, 0.7), facecolors=list(cs),
                           edgecolor="white", linewidth=0.4)
    ax.set_yticks(range(len(UNITS)), UNITS)
    ax.invert_yaxis()
    ax.set_xlim(0, trace.cycles)
    ax.set_xlabel("cycle")
    _integer_ticks(ax.xaxis)
    ax.set_title(f"micro-ops per unit, {engine_name(prog)} (colour: output tile)")


def pe_busy(prog, trace) -> np.ndarray:
    """Busy PEs per cycle: PE (r, c) works on vector v in cycles t_data + P (v + r + c) .. + P - 1
    (docs/timing.md), for every matmul's active block."""
    busy = np.zeros(trace.cycles + 1)
    cyc = np.arange(trace.cycles + 1)
    for _, issue, _, _, rows, cols, vec in est.matmul_spans(prog, trace):
        diag = np.convolve(np.ones(rows), np.ones(cols))                # PEs with r + c = d
        per_step = np.convolve(diag, np.ones(vec))                      # PEs busy at step u
        u = (cyc - issue - DEFAULT_SBUF_LATENCY) // prog.passes
        ok = (u >= 0) & (u < per_step.size)
        busy[ok] += per_step[u[ok]]
    return busy


def utilisation(prog, trace, ax):
    busy = pe_busy(prog, trace) / (prog.rows * prog.cols)
    ax.fill_between(np.arange(busy.size), 100 * busy, step="pre", color="tab:green", alpha=0.6)
    e = est.estimate(prog, trace)
    mean = 100 * e["utilisation"]
    ax.axhline(mean, color="k", linestyle="--", linewidth=1, label=f"whole run {mean:.0f}% (ideal / cycles)")
    ax.set_ylim(0, 105)
    ax.set_xlim(0, trace.cycles)
    ax.set_xlabel("cycle")
    ax.set_ylabel("PEs busy (%)")
    _integer_ticks(ax.xaxis)
    ax.legend(loc="lower center", fontsize=8)
    ax.set_title(f"PE utilisation, {engine_name(prog)} PEs\n{e['bound_text']}", fontsize=9, wrap=True)


def psum_banks(prog, trace, ax):
    """Each output tile's accumulate group: from its first PSUM write to its last, per bank."""
    spans = est.write_spans(trace, [op for t in prog.tiles for op in (t.first_op, t.last_op)])
    first, last = ({op: span[i] for op, span in spans.items()} for i in (0, 1))
    colours = plt.get_cmap("tab10")
    rows_name, cols_name = axes_names(prog)[2]
    for i, t in enumerate(sorted(prog.tiles, key=lambda t: t.first_op)):
        start, end = first.get(t.first_op), last.get(t.last_op)
        if start is None or end is None:
            continue
        for b in range(t.bank, t.bank + t.banks):
            ax.broken_barh([(start, end - start + 1)], (b - 0.4, 0.8), facecolors=colours(i % 10))
            if end - start > 0.06 * trace.cycles:
                ax.text(start + (end - start) / 2, b, f"{rows_name} {t.m0}:, {cols_name} {t.n0}:", ha="center",
                        va="center", fontsize=7)
    ax.set_ylim(7.6, -0.6)
    ax.set_yticks(range(8))
    ax.set_ylabel("PSUM bank")
    ax.set_xlim(0, trace.cycles)
    ax.set_xlabel("cycle")
    _integer_ticks(ax.xaxis)
    ax.set_title(f"PSUM bank occupancy, {engine_name(prog)} (accumulate groups)")


ERROR_LABEL = "|C - C_ref| / (u |A| |B|)"


EXACT_COLOUR = "0.85"      # the error heatmap's exact cells (error 0): light grey, outside the colour scale


def error_heatmap(prog, C, ax, fig):
    """numerics.componentwise per element (log colour scale): |C - C_ref| against float64 of the
    quantised inputs, in units of the output format's unit roundoff u times |A| |B|; exact
    elements (error 0) masked and drawn in EXACT_COLOUR, named in a legend."""
    from matplotlib.patches import Patch

    from tensore.kernels import numerics
    e = numerics.componentwise(prog, C)
    finite = e[np.isfinite(e)]
    top = float(finite.max()) if finite.size else 0.0
    low = float(finite[finite > 0].min()) if (finite > 0).any() else 1e-3
    vmin = min(low, max(top, 1e-3) / 1e3)
    exact = e == 0
    cmap = plt.get_cmap("magma").with_extremes(bad=EXACT_COLOUR)   # masked cells: the exact ones (NaN: the top)
    shown = np.ma.masked_array(np.maximum(np.where(np.isnan(e), np.inf, e), vmin), mask=exact)
    im = ax.imshow(shown, aspect="auto", interpolation="nearest", cmap=cmap,
                   norm=LogNorm(vmin=vmin, vmax=max(top, 10 * vmin)))
    ax.legend(handles=[Patch(facecolor=EXACT_COLOUR, edgecolor="0.4",
                             label=f"exact (error 0): {int(exact.sum()):,} of {e.size:,}")],
              loc="upper right", fontsize=8, framealpha=0.9)
    u = numerics.unit_roundoff(prog.out_dtype)
    fig.colorbar(im, ax=ax, label=f"{ERROR_LABEL}, u = 2^{int(np.log2(u))}")
    rows_name, cols_name, _ = axes_names(prog)
    ax.set_xlabel(cols_name)
    ax.set_ylabel(rows_name)
    _integer_ticks(ax.xaxis, ax.yaxis)
    ax.set_title(f"error vs float64, {engine_name(prog)}: max {top:.3g} u |A||B| "
                 f"(dot-product bound ~ K u |A||B|, K = {prog.a_codes.shape[1]})", fontsize=9)


def dashboard_figure(prog, trace, C, title=""):
    """The four views of one run in one figure."""
    fig, axes = plt.subplots(2, 2, figsize=(14, 8.5), constrained_layout=True)
    timeline(prog, trace, axes[0, 0])
    utilisation(prog, trace, axes[0, 1])
    psum_banks(prog, trace, axes[1, 0])
    error_heatmap(prog, C, axes[1, 1], fig)
    fig.suptitle(run_title(prog, title))
    return fig


def single_figure(kind, prog, trace, C, title=""):
    """One view: timeline, pe, psum or error."""
    fig, ax = plt.subplots(figsize=(10, 4.5), constrained_layout=True)
    if kind == "error":
        error_heatmap(prog, C, ax, fig)
    else:
        {"timeline": timeline, "pe": utilisation, "psum": psum_banks}[kind](prog, trace, ax)
    fig.suptitle(run_title(prog, title), fontsize=10)
    return fig


def _save(fig, path):
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def dashboard(prog, trace, C, path, title=""):
    """The four views of one run in one PNG."""
    return _save(dashboard_figure(prog, trace, C, title), path)


def single(kind, prog, trace, C, path, title=""):
    return _save(single_figure(kind, prog, trace, C, title), path)


def sweep(results: dict, path, title="PE utilisation vs shape"):
    """results: {label: [(size, utilisation), ...]} -> a line plot."""
    fig, ax = plt.subplots(figsize=(8, 4.5), constrained_layout=True)
    for label, pts in results.items():
        x, y = zip(*pts)
        ax.plot(x, [100 * v for v in y], marker="o", label=label)
    ax.set_xscale("log", base=2)
    sizes = sorted({x for pts in results.values() for x, _ in pts})
    ax.set_xticks(sizes, [str(x) for x in sizes])
    ax.minorticks_off()
    ax.set_xlabel("M = K = N")
    ax.set_ylabel("PE utilisation (%)")
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title)
    return _save(fig, path)
