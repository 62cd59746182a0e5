"""Cycle estimate of a kernel program from the golden engine's trace (docs/timing.md): cycles, the
ideal cycles (MACs / PEs at the dtype's rate), PE utilisation and what the lost cycles went to."""
from __future__ import annotations

import numpy as np

from tensore.model.isa.enums import Opcode
from tensore.model.words import plural

MATMULS = (Opcode.MATMUL, Opcode.MATMUL_SPARSE, Opcode.MATMUL_MX)


LOADS = (Opcode.LDWEIGHTS, Opcode.LDWEIGHTS_MX, Opcode.LDTAGS)


def moving_vectors(desc, pack: int) -> int:
    """The moving vectors a matmul descriptor streams: its source pattern's elements over `pack`
    (MatmulSparse: over its fmaps per vector too)."""
    n = desc.fields["src_mem_pattern"]["num_elem"]
    if isinstance(n, int):
        return n // pack
    fmaps = n[3] if desc.op == Opcode.MATMUL_SPARSE else 1        # MatmulSparse: fmaps per vector
    return int(np.prod(n)) // pack // fmaps


def _block(desc, cols: int) -> tuple:
    f = desc.fields
    c = f.get("num_active_cols", 0) or cols
    return f["num_active_rows"], c


def matmul_spans(prog, trace) -> list:
    """(op, issue, stream end, complete, rows, cols, vectors) of every executed matmul."""
    out = []
    for o in trace.ops:
        if o.desc.op in MATMULS and o.t_issue is not None and not o.error:
            v = moving_vectors(o.desc, prog.pe_pack)
            r, c = _block(o.desc, prog.cols)
            out.append((o.index, o.t_issue, o.t_issue + v * prog.passes, o.t_complete, r, c, v))
    return out


def estimate(prog, trace) -> dict:
    """Cycles and where they went; the parts add up to the cycles and the largest is the bound:
    compute (ideal), partial tiles (streaming with an active block smaller than the array),
    weight loads / dependencies (moving port idle between matmuls), fill and drain (before the
    first matmul streams and after the last one, R + C of pipeline)."""
    pes = prog.rows * prog.cols
    spans = matmul_spans(prog, trace)
    cycles = trace.cycles
    ideal = prog.macs * prog.passes / (pes * prog.pe_pack)
    lw_issues = sorted(o.t_issue for o in trace.ops if o.desc.op in LOADS and o.t_issue is not None)
    stream = sum(s[2] - s[1] for s in spans)
    gap_w = gap_d = 0
    for prev, cur in zip(spans, spans[1:]):
        gap = cur[1] - prev[2]
        if gap > 0:
            loaded = any(prev[1] < t < cur[1] for t in lw_issues)
            gap_w, gap_d = (gap_w + gap, gap_d) if loaded else (gap_w, gap_d + gap)
    fill = (spans[0][1] if spans else 0) + (cycles - spans[-1][2] if spans else cycles)
    parts = {"compute": ideal, "partial tiles": stream - ideal,
             "weight loads": gap_w, "dependency stalls": gap_d, "fill / drain": fill}
    bound = max(parts, key=parts.get)
    return {"cycles": cycles, "ideal_cycles": ideal, "utilisation": ideal / cycles if cycles else 0.0,
            "stream_cycles": stream, "matmuls": len(spans), "weight_loads": len(lw_issues),
            "breakdown": parts, "bound": bound, "bound_text": bound_text(parts, cycles, ideal, stream),
            "psum": bank_turnover(prog, trace), "macs": prog.macs, "pes": pes}


TIE = 0.01          # parts within 1% of the cycles of the largest tie with it


def bound_text(parts: dict, cycles: int, ideal: float, stream: float) -> str:
    """What bounds the run: the largest part, or the parts that tie with it (within TIE of the
    cycles); when partial tiles are among them, the share of the PEs the streaming matmuls keep busy."""
    top = max(parts.values())
    ties = [k for k, v in parts.items() if top - v <= TIE * cycles]
    share = f"{100 * top / cycles:.0f}% of the cycles" if cycles else "no cycles"
    text = (f"bound by {ties[0]} ({share})" if len(ties) == 1 else
            f"{', '.join(ties[:-1])} and {ties[-1]} tie ({share} each)")
    if "partial tiles" in ties and stream:
        text += (f": the matmuls stream with active blocks smaller than the array, {100 * ideal / stream:.0f}% "
                 f"of the PEs busy while streaming")
    return text


def write_spans(trace, ops) -> dict:
    """{op: (first, last)}: the cycles of the first and last PSUM write of each listed micro-op that
    writes PSUM.  An aggregate trace's WriteBlocks give them without expanding a write: column c,
    vector v writes at timing.write_cycle(col0 + c, v), rising in both (docs/timing.md)."""
    want, out = set(ops), {}
    for b in trace.blocks:
        if b.op in want:
            out[b.op] = (int(b.timing.write_cycle(b.col0, 0)), int(b.last_cycle))
    for op, (cycle, *_) in trace.psum_writes_of(want - set(out)).items():
        if cycle.size:
            out[op] = (int(cycle.min()), int(cycle.max()))
    return out


def bank_turnover(prog, trace) -> dict:
    """PSUM bank reuse: for each tile whose bank an earlier tile used, the cycles between the earlier
    group's last write and the new group's first write (what a drain of the bank has)."""
    t_issue = {o.index: o.t_issue for o in trace.ops}
    t_done = {o.index: o.t_complete for o in trace.ops}
    spans = write_spans(trace, [t.first_op for t in prog.tiles])
    last_use, windows = {}, []
    for tile in sorted(prog.tiles, key=lambda t: t.first_op):
        for b in range(tile.bank, tile.bank + tile.banks):
            if b in last_use:
                first = spans[tile.first_op][0] if tile.first_op in spans else t_issue[tile.first_op]
                windows.append(first - t_done[last_use[b]])
            last_use[b] = tile.last_op
    return {"banks_used": len(last_use), "reuses": len(windows),
            "min_drain_window": min(windows) if windows else None}


def format_estimate(est: dict) -> str:
    b = est["breakdown"]
    parts = ", ".join(f"{k} {v:,.0f}" for k, v in b.items())
    ps = est["psum"]
    banks = plural(ps["banks_used"], "bank")
    drain = (f"; PSUM: {banks}, {plural(ps['reuses'], 'reuse')}, shortest drain window "
             f"{plural(ps['min_drain_window'], 'cycle')}" if ps["reuses"] else f"; PSUM: {banks}, no reuse")
    return (f"cycles {est['cycles']:,} (ideal {est['ideal_cycles']:,.0f} = {est['macs']:,} MACs / {est['pes']} PEs), "
            f"PE utilisation {100 * est['utilisation']:.1f}%, {est['bound_text']}\n"
            f"  {plural(est['matmuls'], 'matmul')}, {plural(est['weight_loads'], 'weight load')}; cycles: "
            f"{parts}{drain}")
