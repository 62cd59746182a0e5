"""Pictures of a kernel run (matplotlib, Agg): a Gantt timeline of the micro-ops per unit, PE
utilisation over time, PSUM bank occupancy, an error heatmap against float64, utilisation sweeps."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402

from tensore.model.isa.enums import Opcode  # noqa: E402
from tensore.model.timing import DEFAULT_SBUF_LATENCY  # noqa: E402
from tensore.kernels import estimate as est  # noqa: E402

UNITS = ("weight port", "moving port", "array -> PSUM")


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
    ax.set_title("micro-ops per unit (colour: output tile)")


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
    mean = 100 * est.estimate(prog, trace)["utilisation"]
    ax.axhline(mean, color="k", linestyle="--", linewidth=1, label=f"whole run {mean:.0f}% (ideal / cycles)")
    ax.set_ylim(0, 105)
    ax.set_xlim(0, trace.cycles)
    ax.set_xlabel("cycle")
    ax.set_ylabel("PEs busy (%)")
    ax.legend(loc="lower center", fontsize=8)
    ax.set_title(f"PE utilisation ({prog.rows} x {prog.cols} PEs)")


def psum_banks(prog, trace, ax):
    """Each output tile's accumulate group: from its first PSUM write to its last, per bank."""
    spans = est.write_spans(trace, [op for t in prog.tiles for op in (t.first_op, t.last_op)])
    first, last = ({op: span[i] for op, span in spans.items()} for i in (0, 1))
    colours = plt.get_cmap("tab10")
    for i, t in enumerate(sorted(prog.tiles, key=lambda t: t.first_op)):
        start, end = first.get(t.first_op), last.get(t.last_op)
        if start is None or end is None:
            continue
        for b in range(t.bank, t.bank + t.banks):
            ax.broken_barh([(start, end - start + 1)], (b - 0.4, 0.8), facecolors=colours(i % 10))
            if end - start > 0.06 * trace.cycles:
                ax.text(start + (end - start) / 2, b, f"C[{t.m0}:, {t.n0}:]", ha="center", va="center", fontsize=7)
    ax.set_ylim(7.6, -0.6)
    ax.set_yticks(range(8))
    ax.set_ylabel("PSUM bank")
    ax.set_xlim(0, trace.cycles)
    ax.set_xlabel("cycle")
    ax.set_title("PSUM bank occupancy (accumulate groups)")


def error_heatmap(prog, C, ax, fig):
    """|C - float64 reference| in ulps of the output format, per element (log colour scale)."""
    from tensore.kernels import numerics
    u = numerics.ulps(C, numerics.reference64(prog), prog.out_dtype).astype(float)
    im = ax.imshow(u + 1, aspect="auto", interpolation="nearest", cmap="magma",
                   norm=LogNorm(vmin=1, vmax=max(2.0, u.max() + 1)))
    fig.colorbar(im, ax=ax, label="ulps + 1")
    ax.set_xlabel("n")
    ax.set_ylabel("m")
    ax.set_title(f"error vs float64 (max {int(u.max())} ulp)")


def dashboard(prog, trace, C, path, title=""):
    """The four views of one run in one PNG."""
    fig, axes = plt.subplots(2, 2, figsize=(14, 8.5), constrained_layout=True)
    timeline(prog, trace, axes[0, 0])
    utilisation(prog, trace, axes[0, 1])
    psum_banks(prog, trace, axes[1, 0])
    error_heatmap(prog, C, axes[1, 1], fig)
    fig.suptitle(title or prog.note)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def single(kind, prog, trace, C, path, title=""):
    fig, ax = plt.subplots(figsize=(10, 4.5), constrained_layout=True)
    if kind == "error":
        error_heatmap(prog, C, ax, fig)
    else:
        {"timeline": timeline, "pe": utilisation, "psum": psum_banks}[kind](prog, trace, ax)
    fig.suptitle(title or prog.note, fontsize=10)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def sweep(results: dict, path, title="PE utilisation vs shape"):
    """results: {label: [(size, utilisation), ...]} -> a line plot."""
    fig, ax = plt.subplots(figsize=(8, 4.5), constrained_layout=True)
    for label, pts in results.items():
        x, y = zip(*pts)
        ax.plot(x, [100 * v for v in y], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("M = K = N")
    ax.set_ylabel("PE utilisation (%)")
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
