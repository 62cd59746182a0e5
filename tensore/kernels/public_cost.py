"""The public Tensor Engine cost model beside the engine's clock (docs/timing.md, "Against the
public cost model"; D-T93).

AWS publishes an estimated cost per Tensor Engine instruction (nki.isa.nc_matmul, "Estimated
instruction cost", Neuron release 2.26.1; the Trainium / Inferentia2 architecture guide):

    matmul     max(min(MM_INIT, N_stationary), N_moving) cycles, its stationary load included;
               fp32 inputs FP32_FACTOR times that
    transpose  max(P, min(MM_INIT, F))  (P partitions in, F elements of free size)

and matmuls on disjoint row / column tiles run in parallel ("Tiling mode").  Here N_stationary is
the micro-op's active columns (the stationary free size), N_moving its moving vectors, P its
active rows.  `compare` schedules a program's executed matmuls by those costs (in order; one
waits for the last earlier matmul whose PE block overlaps its own) and sets the golden engine's
cycles beside them, matmul by matmul.  The public page covers nc_matmul; MatmulMX and
MatmulSparse are costed by the same formula and marked so.  MAVERICK is unpublished: the
formula is applied as for MARIANA."""
from __future__ import annotations

from dataclasses import dataclass

from tensore.kernels.estimate import LOADS, MATMULS, moving_vectors
from tensore.model.dtypes import Dtype
from tensore.model.isa.enums import Opcode
from tensore.model.isa.microop import microop
from tensore.model.timing import DEFAULT_PROFILE, LOAD_COLS, MM_INIT, blocks_overlap, profile
from tensore.model.words import plural

FP32_FACTOR = 4           # fp32 inputs: four passes of the array
FORMULA_ONLY = {Opcode.MATMUL_SPARSE: "sparse", Opcode.MATMUL_MX: "mx"}   # no public figure of their own


def matmul_cost(n_stationary: int, n_moving: int, fp32: bool = False) -> int:
    """nc_matmul's estimated cycles: max(min(64, N_stationary), N_moving), x4 for fp32 inputs."""
    return max(min(MM_INIT, n_stationary), n_moving) * (FP32_FACTOR if fp32 else 1)


def transpose_cost(partitions: int, free: int) -> int:
    """A transpose through the Tensor Engine: max(P, min(64, F)) cycles."""
    return max(partitions, min(MM_INIT, free))


@dataclass(frozen=True)
class Row:
    """One executed matmul: its shape, the engine's cycles to the next matmul's issue (the last:
    its stream, vectors x passes) and the public cost with its place in the tiled schedule."""
    index: int
    name: str
    block: tuple            # (row0, rows, col0, cols)
    vectors: int
    passes: int
    kind: str               # matmul, transpose, or the formula-only kinds
    ours: int
    public: int
    public_start: int


def compare(trace, timing=DEFAULT_PROFILE) -> dict:
    """The executed matmuls of a golden trace (run under the profile `timing`) against the public
    cost model: rows (Row), the engine's cycles from the first weight load or matmul to the end of
    the last stream, the public schedule's cycles, their ratio and the reasons for the gaps."""
    done = [o for o in trace.ops if o.t_issue is not None and not o.error]
    mms = [o for o in done if o.desc.op in MATMULS]
    rows, placed = [], []                       # placed: (block, public end)
    start = 0
    for i, o in enumerate(mms):
        mo = microop(o.desc, trace.rows, trace.cols)
        v = max(1, moving_vectors(o.desc, mo.pack))
        block = (mo.row0, mo.rows, mo.col0, mo.cols)
        if mo.xpose:
            kind, cost = "transpose", transpose_cost(mo.rows, v)
        else:
            kind = FORMULA_ONLY.get(o.desc.op, "matmul")
            cost = matmul_cost(mo.cols, v, mo.dtype == Dtype.FP32)
        start = max([start] + [end for b, end in placed if blocks_overlap(b, block)])
        placed.append((block, start + cost))
        ours = (mms[i + 1].t_issue - o.t_issue) if i + 1 < len(mms) else v * mo.passes
        rows.append(Row(o.index, o.name, block, v, mo.passes, kind, ours, cost, start))
    first = min((o.t_issue for o in done if o.desc.op in LOADS + MATMULS), default=0)
    ours_total = (mms[-1].t_issue + rows[-1].ours - first) if mms else 0
    public_total = max((end for _, end in placed), default=0)
    loads = sorted(o.t_issue for o in done if o.desc.op in LOADS)
    return {"rows": rows, "ours": ours_total, "public": public_total,
            "ratio": ours_total / public_total if public_total else None,
            "reasons": reasons(rows, [o.t_issue for o in mms], loads, trace.rows, trace.cols, timing)}


def _apart_rows(a: tuple, b: tuple) -> bool:
    """Whether PE blocks (row0, rows, ...) share no row: under `row_tiles` the engine runs them side
    by side as the public model does (D-T100)."""
    return not blocks_overlap((a[0], a[1], 0, 1), (b[0], b[1], 0, 1))


def reasons(rows: list, issues: list, loads: list, R: int, C: int, timing=DEFAULT_PROFILE) -> list:
    """The known rules of the timing profile (docs/timing.md) behind the gaps between the engine's
    cycles and the public model's, each a line with its count: a weight load between two matmuls
    waits for the swap front to cross the whole R x C array (`contract`) or loads behind it
    (`public`); weights reused issue with no 64-cycle floor (`contract`); matmuls on disjoint tiles
    run one after another."""
    prof = profile(timing)
    out = []
    gaps = list(zip(rows, issues, issues[1:]))
    loaded = [r for r, a, b in gaps if r.ours > r.public and any(a < t < b for t in loads)]
    if loaded and prof.column_loads:
        out.append(f"{len(loaded)} of {len(gaps)} matmul intervals hold a weight load: a plain one writes each row "
                   f"{LOAD_COLS} columns at a time, a group each `passes` cycles of the matmul before it, behind that "
                   "matmul's swap front (docs/timing.md, 'Background loads'), so the front crosses the last column "
                   "before the load ends, and its matmul issues after the load's decode; a transposing, MX, LUT, tag "
                   "or last-column-first load follows the front row by row and loads a row per cycle ('Row "
                   "wavefront'); the public model counts min(64, N_stationary) for both")
    elif loaded:
        line = (f"{len(loaded)} of {len(gaps)} matmul intervals hold a weight load: it waits until the previous "
                f"matmul has swapped weights in every PE of the {R} x {C} array (passes x (R + C) = "
                f"{loaded[0].passes * (R + C)} cycles after its first vector, docs/timing.md 'Ldweights') and loads "
                "a row per cycle; the public model loads the next stationary tile while the current one computes")
        out.append(line + _smaller_engine(rows, R, C))
    floor = [r for r, a, b in gaps if r.ours < r.public and not any(a < t < b for t in loads)]
    if floor and not prof.issue_floor:
        out.append(f"{plural(len(floor), 'matmul')} {'reuses' if len(floor) == 1 else 'reuse'} the loaded weights and issue {min(r.ours for r in floor)}+ cycles apart; "
                   f"the public model starts one at most every min({MM_INIT}, N_stationary) cycles "
                   "(MM_INIT_LATENCY), a floor the contract timing does not have")
    tiled = [r for k, r in enumerate(rows) if k and r.public_start < rows[k - 1].public_start + rows[k - 1].public
             and not (prof.row_tiles and _apart_rows(r.block, rows[k - 1].block))]
    if tiled:
        what = "column tiles in parallel); the engine runs column tiles" if prof.row_tiles else \
            "row / column tiles in parallel); the engine runs them"
        out.append(f"{plural(len(tiled), 'matmul')} {'runs' if len(tiled) == 1 else 'run'} beside the one before in the "
                   f"public schedule (disjoint {what} one after another")
    return out


def _smaller_engine(rows: list, R: int, C: int) -> str:
    """The hint that the program uses only part of the R x C array, so a front over a smaller engine
    is shorter; empty when it uses every row and column."""
    used_r = max(r.block[0] + r.block[1] for r in rows)
    used_c = max(r.block[2] + r.block[3] for r in rows)
    if used_r == R and used_c == C:
        return ""
    return (f". The matmuls use PEs up to row {used_r} and column {used_c} of {R} x {C}: on an engine of that "
            "size (--rows / --cols) the front is shorter")


def format_compare(cmp: dict, limit: int | None = 16) -> str:
    """The comparison as text: a line per matmul (the first `limit`; None: all) and the totals."""
    rows = cmp["rows"]
    if not rows:
        return "public cost model: no matmul executed"
    lines = ["matmul vs the public cost model (nki.isa.nc_matmul; tiles in parallel):",
             "  #op   block (row0+rows, col0+cols)  vectors  passes  tensore  public  kind"]
    for r in rows[:limit] if limit else rows:
        b = r.block
        lines.append(f"  #{r.index:<4} {f'{b[0]}+{b[1]}, {b[2]}+{b[3]}':<28} {r.vectors:>7}  {r.passes:>6}  "
                     f"{r.ours:>7}  {r.public:>6}  {r.kind}")
    if limit and len(rows) > limit:
        lines.append(f"  ... {len(rows) - limit} more matmuls")
    ratio = f", {cmp['ratio']:.2f}x the public model" if cmp["ratio"] else ""
    lines.append(f"  total: tensore {cmp['ours']:,} cycles from the first load to the last stream's end; "
                 f"public {cmp['public']:,}{ratio}")
    if cmp.get("reasons"):
        lines.append("  why they differ (the timing profile's rules, docs/timing.md):")
        lines += [f"  - {why}" for why in cmp["reasons"]]
    return "\n".join(lines)
