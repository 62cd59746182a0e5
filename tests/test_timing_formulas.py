"""The timing formulas of model/timing.py as the golden engine shows them, against docs/timing.md's
closed forms written here with plain integers: a row tile span (D-T100), a row-serial load's
completion, a load's wait for every PE of the last matmul to swap (`contract`), the instruction
FIFO's push, decode and issue."""
import itertools

import pytest

from tensore.model import timing
from tensore.model.dtypes import Gen
from tensore.model.engine import Engine
from tensore.model.isa.asm import assemble
from tests.fixtures import valid

G = Gen.MARIANA


def _t3(addr: str, n: int) -> str:
    return f"(start_addr={addr}, step_elem=[1,0,0], num_elem=[{n},1,1])"


def _load(rows: int, cols: int, mode: str = "", dtype: str = "bf16") -> str:
    return (f"ldweights in_dtype={dtype} {mode}rows={rows} cols={cols} flags=(load_order=last_col_first) "
            f"src={_t3('sbuf(0,0x000)', cols)}\n")


def _matmul(rows: int, cols: int, n: int, mode: str = "", dtype: str = "bf16") -> str:
    return (f"matmul in_dtype={dtype} {mode}out_dtype=fp32 rows={rows} cols={cols} acc=single "
            f"src={_t3('sbuf(0,0x400)', n)} dst={_t3('psum(0,0,0)', n)}\n")


def test_tile_span_is_whole_tiles():
    """tile_span(rows, tile) is rows rounded up to a whole number of tiles: ceil(rows / tile) * tile,
    for every power-of-two tile up to 128 and every row count up to 256."""
    for tile in (128, 64, 32, 16, 8, 4, 2, 1):
        for rows in range(1, 257):
            assert timing.tile_span(rows, tile) == -(-rows // tile) * tile, (rows, tile)


@pytest.mark.parametrize("latency", [2, 3])
@pytest.mark.parametrize("rows", [1, 4, 7])
def test_row_serial_load_completes_with_its_last_row(rows, latency):
    """A row-serial load of K rows issued at t writes row k's shadow weights at t + k + L and completes
    in t + K - 1 + L (docs/timing.md, Ldweights); a PeRegWrite after it (a barrier) issues the cycle
    after that."""
    eng = Engine(G, rows=8, cols=8, sbuf_latency=latency, timing="contract")
    trace = eng.run(assemble(_load(rows, 8), G) + valid("pe_reg_write", "mariana"))
    lw, reg = trace.ops
    writes = sorted(e.cycle for e in trace.events if e.kind == "shadow_write" and e.op == lw.index)
    assert writes == [lw.t_issue + k + latency for k in range(rows)]
    assert lw.t_complete == lw.t_issue + rows - 1 + latency
    assert reg.t_issue == lw.t_issue + rows + latency


@pytest.mark.parametrize("fp32", [False, True], ids=["1-pass", "4-pass"])
@pytest.mark.parametrize("shape", [(4, 8), (8, 4), (8, 8)], ids=str)
def test_contract_load_waits_for_every_pe_to_swap(shape, fp32):
    """Under `contract` a weight load after a matmul issues once every PE of the array has taken the
    matmul's first vector: issue = t_data + P * (R + C) - L, t_data = the matmul's issue + L
    (docs/timing.md, issue rules), for R x C arrays both ways round."""
    R, C = shape
    L = 2
    mode, dtype, passes = ("fp32_mode=high ", "fp32", 4) if fp32 else ("", "bf16", 1)
    text = _load(R, C, mode, dtype) + _matmul(R, C, 3, mode, dtype) + _load(R, C, mode, dtype)
    trace = Engine(G, rows=R, cols=C, sbuf_latency=L, timing="contract").run(assemble(text, G))
    _, mm, lw = trace.ops
    assert lw.t_issue == (mm.t_issue + L) + passes * (R + C) - L


@pytest.mark.parametrize("sel,depth", [(0, 16), (1, 1)])
def test_the_fifo_holds_16_descriptors_or_1(sel, depth):
    """docs/timing.md: push(i) = i while the instruction FIFO has room (16 entries, or 1 with
    queue_cfg.fifo_size_sel), else the cycle after the descriptor `depth` places ahead left it (issued);
    decode(i) = max(push(i) + 1, pop(i-1) + 1); issue no sooner than decode(i) + 1 (the first descriptor
    in cycle 2).  A 256-vector matmul
    and 20 PeRegWrites behind it (each a barrier) fill the FIFO."""
    text = assemble(_load(8, 8) + _matmul(8, 8, 256), G) + valid("pe_reg_write", "mariana") * 20
    eng = Engine(G, rows=8, cols=8)
    eng.regs.set("queue_cfg", "fifo_size_sel", sel)
    ops = eng.run(text).ops
    pop = [op.t_issue for op in ops]
    assert [op.t_push for op in ops] == [i if i < depth else max(i, pop[i - depth] + 1) for i in range(len(ops))]
    assert [op.t_decode for op in ops] == [max(op.t_push + 1, (pop[i - 1] if i else -1) + 1) for i, op in enumerate(ops)]
    assert all(op.t_issue >= op.t_decode + 1 for op in ops) and ops[0].t_issue == ops[0].t_decode + 1 == 2
    assert ops[2].t_issue == ops[1].t_complete + 1  # a barrier: the cycle after all before it completed
    assert any(op.t_push > i for i, op in enumerate(ops))        # the FIFO was full


def test_at_most_16_micro_ops_in_flight():
    """docs/timing.md (D-T38): at most 16 micro-ops in flight, issued and not complete.  A burst of
    one-vector 4-pass matmuls on a 16 x 8 array (the coverage closure's sized seed, whose in-flight
    limit binds) has 16 in flight at some issue, never 17."""
    from tensore.cosim import random_programs as R
    ops = [op for op in R.generate(G, 4, rows=16, cols=8).golden()[1].ops if op.t_issue is not None]
    in_flight = [1 + sum(1 for b in ops[:i] if b.t_complete >= op.t_issue) for i, op in enumerate(ops)]
    assert max(in_flight) == 16


def test_closed_forms_of_the_issue_rules():
    """docs/timing.md's closed forms, written here with plain integers, against model/timing.py over
    a grid: the weight port free at issue + K, LdTags behind a MatmulSparse's issue + N + C, a load's
    completion t + K - 1 + L, every PE swapped at t_data + P (R + C), the row wavefront's
    t_data + P (row0 + K + C - 1) - K - L."""
    for t, k, c, p, row0, lat in itertools.product((0, 37), (1, 5, 64), (1, 8, 128), (1, 4), (0, 32), (2, 3)):
        assert timing.load_port_free(t, k) == t + k
        assert timing.sparse_end(t, k, c) == t + k + c
        assert timing.load_complete(t, k, lat) == t + k - 1 + lat
        assert timing.weights_swapped(t, p, k, c) == t + p * (k + c)
        assert timing.load_front_issue(t, p, row0, k, c, lat) == t + p * (row0 + k + c - 1) - k - lat


def test_only_a_plain_load_takes_the_column_port():
    """docs/timing.md (Ldweights, D-T99): a load takes the column-serial port only if it is plain:
    no tags, TAG_WEIGHT, transpose, MX scales, LUT codes nor last-column-first order; every one of
    the 64 combinations of those flags."""
    for flags in itertools.product((0, 1), repeat=6):
        assert bool(timing.column_load(*flags)) == (flags == (0,) * 6), flags


def test_closed_forms_of_the_column_port():
    """docs/timing.md (Background loads, D-T99) with plain integers: G = ceil(C / 2) groups; group g of
    row k written at t + S (k + g) + L; issue t_data + P (row0 + col0 + C - G + 1) - 1 - L after a
    matmul; the port free S G later; the last request out at t + S (K + G - 2) + 1; a load entering
    d rows below the previous one's first row, within its rows, S (G + d) later or at its end."""
    for t, k, c, s, row0, lat in itertools.product((0, 41), (1, 3, 64), (1, 2, 7, 128), (1, 4), (0, 32), (2, 3)):
        g = -(-c // 2)
        assert timing.column_groups(c) == g
        assert [timing.column_write(t, s, k, j, lat) for j in range(g)] == [t + s * (k + j) + lat for j in range(g)]
        assert timing.column_load_issue(t, s, row0, k, c, lat) == t + s * (row0 + k + c - g + 1) - 1 - lat
        port = timing.column_port_free(t, s, c)
        end = timing.column_load_end(t, s, k, c)
        assert port == t + s * g and end == t + s * (k + g - 2) + 1

        def pick(cond, a, b):
            return a if cond else b
        for d in (-1, 0, 1, k - 1, k):
            behind = min(port + s * d, end) if 0 < d < k else port
            assert timing.column_port_next(port, end, s, row0, k, row0 + d, pick) == behind, (d, k)


def _pick(cond, a, b):
    return a if cond else b


def test_overlaps_against_brute_force():
    """blocks_overlap: two PE blocks (row0, rows, col0, cols) share a PE, as sets of PEs; psum_box: the
    partitions and the bytes from the least to one past the last byte its destination pattern
    writes; boxes_overlap: two such boxes share a (partition, byte)."""
    spans = [(0, 1), (0, 2), (1, 2), (2, 1), (3, 2)]
    for a, b in itertools.product(itertools.product(spans, spans), repeat=2):
        ba, bb = (*a[0], *a[1]), (*b[0], *b[1])

        def pes(k):
            return {(r, c) for r in range(k[0], k[0] + k[1]) for c in range(k[2], k[2] + k[3])}
        assert bool(timing.blocks_overlap(ba, bb)) == bool(pes(ba) & pes(bb)), (ba, bb)
        boxes = [(x[0], x[0] + x[1], y[0], y[0] + y[1]) for x, y in (a, b)]
        cells = [{(p, q) for p in range(x[0], x[1]) for q in range(x[2], x[3])} for x in boxes]
        assert bool(timing.boxes_overlap(*boxes)) == bool(cells[0] & cells[1]), boxes
    for steps, nums, esize in (((1, 4, 0), (3, 2, 1), 4), ((-2, 1, 5), (2, 3, 2), 2), ((3, -1, 0), (2, 4, 1), 1)):
        written = [sum(i * s for i, s in zip(idx, steps)) * esize for idx in itertools.product(*map(range, nums))]
        assert timing.psum_box(5, 3, 64, steps, nums, esize, _pick) == (5, 8, 64 + min(written), 64 + max(written) + esize)


def test_closed_forms_of_the_matmul_stream():
    """The matmul's stream (docs/timing.md, Matmul; D-T100) with plain integers: the sum of (c, v) in
    PSUM at t_data + P (v + R + c) + 1; the moving port free at t + P N; the write lead L + P (S + c0)
    + 1; a row tile d rows below an entry free at port + P d; the tap below the last tile
    (entry + span) / tile - 1; a P-pass matmul in rhythm every P cycles; a seed transpose after
    the identity load's completion; a stream enters at its first row (a transpose's at row 0, over
    the whole array)."""
    for t, r, c, v, p in itertools.product((0, 29), (1, 8, 128), (0, 3, 64), (0, 1, 17), (1, 4)):
        assert timing.write_cycle(t, r, p, c, v) == t + p * (v + r + c) + 1
        assert timing.mm_port_free(t, v, p) == t + p * v
        assert timing.write_lead(2, r, c, p) == 2 + p * (r + c) + 1
        assert timing.entry_free(t, p, r) == t + p * r
        assert [timing.in_rhythm(t + d, t, p) for d in range(8)] == [d % p == 0 for d in range(8)]
    assert [timing.tap_of(e, s, 32) for e, s in ((0, 32), (0, 64), (32, 32), (64, 64), (96, 32))] == [0, 1, 1, 3, 3]
    assert timing.seed_transpose_issue(10, 8, 2) == 10 + 8 - 1 + 2 + 1
    assert timing.tile_stream(64, 40, False, 128, 32, _pick) == (64, 64)
    assert timing.tile_stream(64, 40, True, 128, 32, _pick) == (0, 128)


def test_array_timing_of_a_matmul():
    """ArrayTiming (docs/timing.md, Matmul; D-T100) with plain integers: PE (r, c) works on vector v
    from t_data + P (v + r - row0 + c); the issue rules' front is t_data - P row0; the (c, v) sum is
    in its tap register a cycle before its PSUM write."""
    for t, rows, p, row0, r, c, v in itertools.product((0, 50), (8, 64), (1, 4), (0, 32), (32, 40), (0, 5), (0, 3)):
        at = timing.ArrayTiming(t, rows, p, row0)
        assert at.pe_cycle(r, c, v) == t + p * (v + r - row0 + c)
        assert at.front == t - p * row0
        assert at.output_cycle(c, v) == at.write_cycle(c, v) - 1 == t + p * (v + rows + c)
