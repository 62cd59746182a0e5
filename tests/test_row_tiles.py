"""Row tiles side by side (`Profile.row_tiles`, part of the default `public` profile, D-T100): a
matmul's moving stream enters at its first row, its sums leave below its last row tile, and each row
tile has its own moving port, so matmuls on disjoint row tiles run together as nc_matmul's "Tiling
mode" says.  The golden engine here, against `SERIAL` (`public` with the tiles one after another);
the RTL in tests/test_rtl_row_tiles.py."""
from dataclasses import replace

import numpy as np
import pytest

from tensore.cosim import programs as P
from tensore.cosim import random_programs as R
from tensore.model import timing
from tensore.model.dtypes import Gen
from tensore.model.engine import Engine
from tensore.model.isa import Opcode
from tensore.model.isa.asm import assemble
from tensore.model.isa.microop import Kind, row_tile
from tests.test_background_loads import _plain, hazards
from tests.test_public_cost import PAIRS, TABLE, program, run

SERIAL = replace(timing.profile("public"), name="serial", row_tiles=False)


@pytest.mark.parametrize("gen", ["cayman", "mariana"])
def test_two_row_tiles_cost_the_public_figure(gen):
    """Two 64-row tiles, N = 256 each, alternating weight load + matmul pairs: 256 cycles per pair of
    tiles, the public model's figure (512 under `SERIAL`, one tile after the other)."""
    text = program(gen, 256, tiles=True)
    for name, per_pair in (("public", 256), (SERIAL, 512)):
        rows = run(gen, text, timing=name)["rows"]
        assert [r.block[:2] for r in rows] == [(0, 64), (64, 64)] * (PAIRS // 2)
        assert {rows[i].ours + rows[i + 1].ours for i in range(1, PAIRS - 2, 2)} == {per_pair}, name
    cmp = run(gen, text, timing="public")
    assert cmp["public"] == 256 * PAIRS // 2
    assert not any("beside the one before" in r for r in cmp["reasons"]), cmp["reasons"]
    assert any("beside the one before" in r for r in run(gen, text, timing=SERIAL)["reasons"])
    assert [r.public_start for r in cmp["rows"]] == [256 * (i // 2) for i in range(PAIRS)]


@pytest.mark.parametrize("gen", ["cayman", "mariana"])
@pytest.mark.parametrize("case,opts,ours,public", TABLE, ids=[t[0] for t in TABLE])
def test_whole_array_matmuls_as_under_public(gen, case, opts, ours, public):
    """The rest of the table: matmuls over every row are one tile, so the tiles change nothing."""
    text = program(gen, **opts)
    assert [r.ours for r in run(gen, text, timing="public")["rows"]] == \
        [r.ours for r in run(gen, text, timing=SERIAL)["rows"]]


def test_tile_sizes():
    """4 x 32 rows from NeuronCore-v3 (CAYMAN), 2 x 64 on v2 (SUNDA) and MAVERICK (r64 tiles), scaled
    with the array; a matmul spans whole tiles from its first row."""
    assert [row_tile(g, 128) for g in Gen] == [64, 32, 32, 32, 64]
    assert row_tile(Gen.MARIANA, 16) == 4 and row_tile(Gen.SUNDA, 16) == 8
    assert [timing.tile_span(n, 32) for n in (1, 32, 33, 64, 100, 128)] == [32, 32, 64, 64, 128, 128]


def test_sums_leave_below_the_tile():
    """A matmul on rows 64..127 of a 128-row MARIANA array enters at row 64: its first PSUM write comes
    at t + L + passes * (64 + c + v) + 1 (span 64), 64 cycles before `SERIAL`'s and `contract`'s
    (span 128: no row tiles); a matmul on rows 0..39 spans two 32-row tiles."""
    g = Gen.MARIANA
    text = ("ldweights in_dtype=bf16 rows={r} cols=128 row_grp={grp} flags=(load_order=first_col_first) "
            "src=(start_addr=sbuf(0,0x000), step_elem=[1,0,0], num_elem=[128,1,1])\n"
            "matmul in_dtype=bf16 out_dtype=fp32 rows={r} cols=128 row_grp={grp} acc=single "
            "src=(start_addr=sbuf(0,0x400), step_elem=[1,0,0], num_elem=[4,1,1]) "
            "dst=(start_addr=psum(0,0,0), step_elem=[1,0,0], num_elem=[4,1,1])\n")
    for r, grp, span in ((64, 2, 64), (40, 0, 64), (32, 3, 32)):
        firsts = {}
        for name in ("public", SERIAL, "contract"):
            trace = Engine(g, timing=name).run(assemble(text.format(r=r, grp=grp), g))
            mm = trace.ops[1]
            firsts[name] = min(e.cycle for e in trace.events if e.kind == "psum_write" and e.op == mm.index)
            assert firsts[name] == mm.t_issue + 2 + (span if name == "public" else 128) + 1, (r, name)
        assert firsts[SERIAL] - firsts["public"] == 128 - span


def _values(trace) -> list:
    return sorted((e.data["partition"], e.data["offset"], e.data["bits"]) for e in trace.events
                  if e.kind == "psum_write")


def test_same_values_and_no_write_races_a_front():
    """Library programs of three generations write the same PSUM bits with the tiles side by side as
    one after another (`SERIAL`), and no PE's shadow write races a matmul's front with the
    streams entering at each matmul's first row (brute force, tests/test_background_loads.py)."""
    checked = 0
    for gen in ("cayman", "mariana", "maverick"):
        for p in P.library(gen):
            a, b = replace(p, timing="public"), replace(p, timing=SERIAL)
            assert _values(a.golden()[1]) == _values(b.golden()[1]), (gen, p.name)
            if _plain(a):
                assert hazards(a) == [], (gen, p.name)
                checked += 1
    assert checked >= 20


def _tile_race_program():
    """Two weight load + matmul pairs of 4 vectors on rows 4..7 (row_grp 2) of an 8 x 8 MARIANA array
    under `public` (2-row tiles): the second load's front rule binds on the first matmul."""
    b = P._Builder("tile_race", "mariana", 8, 8, 7)
    a = b.put(0, b.values("bf16", (8, 4)), 2)
    for _ in range(2):
        w = b.put(0, b.values("bf16", (8, 8)), 2)
        b.line(f"ldweights in_dtype=bf16 rows=4 cols=8 row_grp=2 flags=(load_order=first_col_first) "
               f"src={P._t3(f'sbuf(4,{w:#x})', 8)}")
        b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows=4 cols=8 row_grp=2 acc=single "
               f"src={P._t3(f'sbuf(4,{a:#x})', 4)} dst={P._t3('psum(0,0,0)', 4)}")
    return replace(b.done(), timing="public")


def test_the_front_binds_exactly_on_a_tile(monkeypatch):
    """On a tile whose stream enters at row 4, the load after a matmul issues on the cycle its front
    rule allows (one cycle earlier, a PE's write races the matmul before); the brute force follows
    the stream's entry row."""
    prog = _tile_race_program()
    trace = prog.golden(shared=False)[1]
    lw, mm = trace.ops[2], trace.ops[1]
    t_front = mm.t_issue + 2 - 4                      # t_data - passes * row0
    assert lw.t_issue == timing.column_load_issue(t_front, 1, 4, 0, 8, 2)
    assert hazards(prog, shared=False) == []
    early = timing.column_load_issue
    monkeypatch.setattr("tensore.model.engine.issue.column_load_issue", lambda *a: early(*a) - 1)
    assert len(hazards(prog, shared=False)) == 1


def test_a_shorter_matmul_does_not_overtake_into_the_same_cells(monkeypatch):
    """K = 9 on CAYMAN's 8 rows, the K tiles in order: a matmul over all 8 rows (MULTI_START) then one
    over row 0 alone (MULTI_END) into the same cells.  The second's sums leave at its tile's tap,
    before the first's leave the bottom: PSUM must still see them in program order (the contract's
    answer, bit for bit).  The kernel issues the partial tile first (gemm._k_order), so nothing waits."""
    from tensore.kernels import gemm as G
    from tensore.kernels import numerics as Nm
    rng = np.random.default_rng(101)
    A, B = rng.standard_normal((1, 9)).astype(np.float32), rng.standard_normal((9, 3)).astype(np.float32)
    lead = timing.write_lead(2, row_tile(Gen.CAYMAN, 8), 0, 1)
    for in_order in (True, False):
        if in_order:
            monkeypatch.setattr(G, "_k_order", lambda t_count, k, k_tile: list(range(t_count)))
        else:
            monkeypatch.undo()
        prog = G.gemm(A, B, dtype="bf16", gen="cayman", rows=8, cols=8)
        C, trace, _ = G.run(prog)
        assert overtakes(trace) == [] and np.array_equal(C.view(np.uint32), Nm.contract(prog).view(np.uint32))
        mm = [o for o in trace.ops if o.desc.op == Opcode.MATMUL]
        assert [o.uop.rows for o in mm] == ([8, 1] if in_order else [1, 8])
        if in_order:
            assert mm[1].t_issue + lead == mm[0].t_complete + 1                    # the write order binds
        else:
            assert mm[1].t_issue + lead > mm[0].t_complete + 1                     # its tap is below


def overtakes(trace) -> list:
    """Each PSUM word a micro-op writes before an earlier micro-op's write to it (program order per
    cell, the order the PSUM events of a trace are made in: cycle, then the engine's order within one):
    (partition, word, earlier op, later op)."""
    writes = sorted(((e.cycle, n, e.data["partition"], e.data["offset"] // 4, e.op)
                     for n, e in enumerate(trace.events) if e.kind == "psum_write"))
    last, out = {}, []
    for _, _, part, word, op in writes:
        seen = last.get((part, word), -1)
        if op < seen:
            out.append((part, word, op, seen))
        last[(part, word)] = max(seen, op)
    return out


def test_psum_writes_keep_program_order():
    """Under every profile every PSUM word takes its writes in program order: library programs of three
    generations, random ones and two micro-ops writing one cell in one cycle (col_groups; under
    `contract` and `SERIAL` the sums leave at one tap, under `public` the write order rule holds a
    matmul leaving higher up)."""
    from tests.test_psum_collisions import col_groups
    for gen in ("cayman", "mariana", "maverick"):
        progs = [p for p in P.library(gen) if p.rows == 8] + [R.generate(gen, s) for s in range(4)]
        progs += [col_groups(gen, 2)] if gen != "maverick" else []
        for name in ("public", "contract", SERIAL):
            for p in progs:
                assert overtakes(replace(p, timing=name).golden()[1]) == [], (p.name, name)


def clashes(prog, L: int = 2) -> list:
    """Each pair of matmuls with a live value in one PE's register in one cycle: a stream issued at t
    enters its entry row (its first row under `row_tiles`, else row 0) at t + L and moves a row down
    and a column right each `passes` cycles, its records from the entry row to its last row, its
    values from column 0 to its last column, its sums from its first row to its tap (the end of its
    span: its tiles, else the array) in its columns.  The registers shift with one rhythm, so only a
    stream entering below another one's entry can overwrite it.  Brute force over every pair,
    independent of the issue rules."""
    _, trace, _ = prog.golden(shared=False)
    prof = timing.profile(prog.timing)
    tile = row_tile(prog.gen, prog.rows) if prof.row_tiles else prog.rows
    r, c = np.arange(prog.rows)[:, None], np.arange(prog.cols)
    streams = []
    for o in trace.ops:
        u = o.uop
        if u is None or o.t_issue is None or u.kind != Kind.MATMUL:
            continue
        row0, rows, col0, cols = u.block
        entry, span = (row0, timing.tile_span(rows, tile)) if prof.row_tiles and not u.xpose else (0, prog.rows)
        live = ((entry <= r) & (r < row0 + rows) & (c < col0 + cols)) | \
            ((row0 <= r) & (r < entry + span) & (col0 <= c) & (c < col0 + cols))
        start = o.t_issue + L + u.passes * (r - entry + c)
        streams.append((o.index, live, start, start + u.passes * _vectors(o)))
    out = []
    for i, (a, live_a, start_a, end_a) in enumerate(streams):
        for b, live_b, start_b, end_b in streams[i + 1:]:
            both = live_a & live_b & (start_a < end_b) & (start_b < end_a)
            if both.any():
                out.append((prog.name, a, b, tuple(int(x) for x in np.argwhere(both)[0])))
    return out


def _vectors(o) -> int:
    """The moving vectors of a matmul's stream: a transpose's rows, a MatmulSparse's vectors of
    `fmaps` feature maps, else the pattern's elements over the elements per PE."""
    u = o.uop
    if u.xpose:
        return u.block[1]
    n = u.src.count // u.pack
    return n // u.src.nums[3] if o.desc.op == Opcode.MATMUL_SPARSE else n


def _entry_program(n: int = 8):
    """A matmul over all 8 rows (columns 0..3), then one on rows 4..7 (row_grp 2, columns 4..7) of an
    8 x 8 MARIANA array under `public` (2-row tiles), n vectors each: the second stream enters at row 4,
    which the first stream's last vector passes 4 + n cycles after its issue."""
    b = P._Builder("tile_entry", "mariana", 8, 8, 7)
    a = b.put(0, b.values("bf16", (8, n)), 2)
    w = b.put(0, b.values("bf16", (8, 4)), 2)
    b.line(f"ldweights in_dtype=bf16 rows=8 cols=4 flags=(load_order=first_col_first) src={P._t3(f'sbuf(0,{w:#x})', 4)}")
    b.line(f"ldweights in_dtype=bf16 rows=4 cols=4 row_grp=2 col_grp=1 flags=(load_order=first_col_first) "
           f"src={P._t3(f'sbuf(4,{w:#x})', 4)}")
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows=8 cols=4 acc=single "
           f"src={P._t3(f'sbuf(0,{a:#x})', n)} dst={P._t3('psum(0,0,0)', n)}")
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows=4 cols=4 row_grp=2 col_grp=1 acc=single "
           f"src={P._t3(f'sbuf(4,{a:#x})', n)} dst={P._t3('psum(0,1,0)', n)}")
    return replace(b.done(), timing="public")


def test_a_tile_entry_waits_for_the_stream_passing_it(monkeypatch):
    """A stream entering at a tile's first row waits until the stream above has passed that row
    (timing.entry_free): the second matmul issues n + 4 cycles after the first, not n (its own
    tile's moving port alone), where the two streams would meet in row 4's registers."""
    prog = _entry_program()
    trace = prog.golden(shared=False)[1]
    first, second = trace.ops[2], trace.ops[3]
    assert second.t_issue - first.t_issue == 8 + 4
    assert clashes(prog) == []
    monkeypatch.setattr("tensore.model.engine.issue.entry_free", lambda port, passes, rows: port)
    assert clashes(prog)


def test_no_two_streams_meet_in_a_register():
    """Library programs of three generations and random ones, under `public` and `contract`:
    no two matmuls' moving values are in one PE in one cycle."""
    progs = [p for g in ("cayman", "mariana", "maverick") for p in P.library(g)]
    progs += [R.generate(g, s, blocks=12) for g in ("cayman", "mariana") for s in range(4)]
    checked = 0
    for p in progs:
        for name in ("public", "contract"):
            q = replace(p, timing=name)
            if _plain(q):
                assert clashes(q) == [], name
                checked += 1
    assert checked >= 40


def test_a_transpose_runs_over_the_whole_array():
    """A transposing matmul's element c rides column c from row c, so with row tiles its stream enters
    at row 0 and its writes leave the bottom as under `SERIAL`, even on rows 4..7 (row_grp 2 of an
    8 x 8 MARIANA array): the same write cycles, the first t + 2 + 8 + 1."""
    b = P._Builder("tile_xpose", "mariana", 8, 8, 5)
    a = b.put(0, b.rng.integers(0, 1 << 16, (8, 6), dtype=np.uint64), 2)
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows=4 cols=8 row_grp=2 flags=(xpose_mode=enabled) acc=single "
           f"src={P._t3(f'sbuf(4,{a:#x})', 6)} dst={P._t3('psum(0,2,0)', 4)}")
    prog = b.done()
    writes = {}
    for name in ("public", SERIAL):
        trace = replace(prog, timing=name).golden(shared=False)[1]
        assert not any(o.error for o in trace.ops), name
        writes[name] = sorted((e.cycle, e.data["partition"], e.data["offset"]) for e in trace.events
                              if e.kind == "psum_write")
        assert writes[name][0][0] == trace.ops[0].t_issue + 2 + 8 + 1, name
    assert writes["public"] == writes[SERIAL]


def taps_program(acc: str = "single"):
    """Matmuls on rows 2..3 and then rows 0..1 (2-row tiles of an 8 x 8 MARIANA array, `public`) into
    one PSUM bank (`acc`: their accumulate flags), the younger's destination 2 vectors further on, so
    both write one cell in one cycle."""
    b = P._Builder("tile_taps", "mariana", 8, 8, 3)
    a = b.put(0, b.values("bf16", (8, 8)), 2)
    w = b.put(0, b.values("bf16", (8, 8)), 2)
    for grp in (1, 0):
        b.line(f"ldweights in_dtype=bf16 rows=2 cols=8 row_grp={grp} flags=(load_order=first_col_first) "
               f"src={P._t3(f'sbuf({2 * grp},{w:#x})', 8)}")
    for grp, off in ((1, 0), (0, 8)):
        b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows=2 cols=8 row_grp={grp} acc={acc} "
               f"src={P._t3(f'sbuf({2 * grp},{a:#x})', 8)} dst={P._t3(f'psum(0,0,{off:#x})', 8)}")
    return replace(b.done(), timing="public")


def test_a_higher_tap_waits_for_the_cells_it_shares():
    """Two matmuls on different row tiles overwrite one PSUM cell (taps_program): the younger leaves at
    the upper tile's tap, so it would write in the older's cycle, the write-back taking the taps from
    the top; the write order rule holds it until its first write follows the older's last, and the cell
    keeps the younger's value (D-T100)."""
    eng, trace, _ = taps_program().golden(shared=False)
    older, younger = trace.ops[2], trace.ops[3]
    lead = timing.write_lead(2, row_tile(Gen.MARIANA, 8), 0, 1)
    assert younger.t_issue + lead == older.t_complete + 1 and younger.t_issue > older.t_issue + 2
    writes = {}
    for e in (e for e in trace.events if e.kind == "psum_write"):
        writes.setdefault((e.data["partition"], e.data["offset"]), []).append((e.cycle, e.op, e.data["bits"]))
    shared = {cell: {op: bits for _, op, bits in w} for cell, w in writes.items() if len(w) == 2}
    assert len(shared) == 8 * 6 and overtakes(trace) == []
    assert sum(w[older.index] != w[younger.index] for w in shared.values()) > 40
    kept = eng.psum.cells(4)
    assert all(int(kept[p, off // 4]) == w[younger.index] for (p, off), w in shared.items())


def seed_save_program(n: int = 4):
    """MAVERICK's r64 tiles of a 4 x 16 array: weights on the upper tile, a SaveSeed (a transposing
    seed move over the whole array: its writes leave at the bottom tap) into PSUM bank 6, a one-vector
    transpose into bank 2, then a matmul on the upper tile overwriting the SaveSeed's cells."""
    b = P._Builder("seed_save_tap", "maverick", 4, 8, 17)
    s = b.put(0, (0x1234_0000 + np.arange(16, dtype=np.uint32))[None], 4)
    a = b.put(0, b.values("bf16", (2, n)), 2)
    w = b.put(0, b.values("bf16", (2, 16)), 2)
    x = b.put(0, b.rng.integers(0, 1 << 16, (1, 1), dtype=np.uint64), 2)
    t = "tile_size=(row_size_log2=r64, col_size_log2=c256) "
    b.line(f"ldweights in_dtype=bf16 rows=2 cols=0 {t}tile_sel=(row_sel=0, col_sel=0) "
           f"flags=(load_order=first_col_first) src={P._t3(f'sbuf(0,{w:#x})', 16)}")
    b.line(f"matmul in_dtype=fp32 fp32_mode=high out_dtype=fp32 rows=1 cols=0 {t}"
           f"flags=(xpose_mode=enabled, seed_mode=save_seed) src=(start_addr=sbuf(0,{s:#x}), step_elem=[1,0,0], "
           "num_elem=[16,1,1]) dst=(start_addr=psum(0,6,0), step_elem=[1,0,1], num_elem=[1,1,2])")
    b.line("matmul in_dtype=bf16 out_dtype=fp32 rows=1 cols=1 tile_size=(row_size_log2=r128, col_size_log2=c128) "
           f"flags=(xpose_mode=enabled, accumulate_flag=overwrite) src={P._t3(f'sbuf(0,{x:#x})', 1)} "
           f"dst={P._t3('psum(0,2,0)', 1)}")
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows=2 cols=0 {t}tile_sel=(row_sel=0, col_sel=0) "
           f"flags=(accumulate_flag=overwrite) src={P._t3(f'sbuf(0,{a:#x})', n)} "
           f"dst=(start_addr=psum(0,6,0), step_elem=[1,0,512], num_elem=[{n},1,2])")
    return replace(b.done(), timing="public")


def test_nothing_overtakes_a_seed_save():
    """A seed move waits for everything and nothing issues before its last write (D-T30): in
    seed_save_program the transpose (of its kind and passes) and the matmul on the upper tile, whose
    sums leave above the SaveSeed's tap, issue after the SaveSeed completes, and the shared cells keep
    the matmul's sums.  So no tap rule (D-T100) ever reads a seed move's writes."""
    eng, trace, _ = seed_save_program().golden(shared=False)
    assert not any(o.error for o in trace.ops), [o.violations for o in trace.ops]
    save, xpose, mm = trace.ops[1:]
    assert xpose.t_issue == save.t_complete + 1 and mm.t_issue > xpose.t_complete
    writes = {}
    for e in (e for e in trace.events if e.kind == "psum_write"):
        writes.setdefault((e.data["partition"], e.data["offset"]), []).append((e.op, e.data["bits"]))
    shared = {cell: dict(w) for cell, w in writes.items() if len(w) == 2}
    assert len(shared) == 16 and overtakes(trace) == []
    kept = eng.psum.cells(4)
    assert all(int(kept[p, off // 4]) == w[mm.index] != w[save.index] for (p, off), w in shared.items())


# Two 5-row matmuls A and B (rows 0..4 of a 16 x 8 MARIANA array: their sums leave at the tap below row
# tile 1) and a 1-row matmul C (its sums leave at tile 0's tap, higher up).  Each destination:
# (partition, bank, byte offset, columns, vectors[, out dtype]).  The tap keeps the bounding box of the
# writes still to come there (A's is joined to B's when A still writes at B's issue) and their last
# write; `held`: C's cells meet that box.
TAP_BOXES = {
    "C-in-A-partitions-A-first": (((0, 0, 0, 1, 1), (4, 0, 0, 1, 2), (0, 0, 0, 1, 1)), True),
    "C-in-B-partitions-B-first": (((4, 0, 0, 1, 1), (0, 0, 0, 1, 2), (0, 0, 0, 1, 1)), True),
    "C-in-B-partitions-A-first": (((0, 0, 0, 1, 1), (4, 0, 0, 1, 2), (4, 0, 0, 1, 1)), True),
    "C-in-A-partitions-B-first": (((4, 0, 0, 1, 1), (0, 0, 0, 1, 2), (4, 0, 0, 1, 1)), True),
    "C-between-the-partitions": (((0, 0, 0, 4, 1), (4, 0, 0, 1, 2), (3, 0, 0, 1, 1)), True),
    "C-in-A-bank-A-first": (((0, 0, 0, 1, 1), (0, 1, 0, 1, 2), (0, 0, 0, 1, 1)), True),
    "C-in-B-bank-B-first": (((0, 1, 0, 1, 1), (0, 0, 0, 1, 2), (0, 0, 0, 1, 1)), True),
    "C-in-B-bank-A-first": (((0, 0, 0, 1, 1), (0, 1, 0, 1, 2), (0, 1, 4, 1, 1)), True),
    "C-in-A-bank-B-first": (((0, 1, 0, 1, 2), (0, 0, 0, 1, 2), (0, 1, 4, 1, 1)), True),
    "C-at-B-end": (((0, 0, 0, 1, 1), (0, 1, 0, 1, 3), (0, 1, 8, 1, 1)), True),
    "C-at-A-offset-0-wide-A": (((4, 0, 0, 4, 1), (4, 1, 0, 1, 2), (4, 0, 0, 1, 1)), True),
    "C-at-B-offset-0-wide-B": (((4, 1, 0, 1, 1), (4, 0, 0, 4, 2), (4, 0, 0, 1, 1)), True),
    "C-after-fp32-cell": (((0, 0, 0, 1, 1), (0, 0, 0, 1, 1), (0, 0, 4, 1, 1)), False),
    "C-in-last-fp32-cell": (((0, 0, 0, 1, 4), (0, 0, 0, 1, 4), (0, 0, 12, 1, 1)), True),
    "C-after-bf16-cell": (((0, 0, 0, 1, 1, "bf16"), (0, 0, 0, 1, 1, "bf16"), (0, 0, 2, 1, 1, "bf16")), False),
    "C-in-last-bf16-cell": (((0, 0, 0, 1, 4, "bf16"), (0, 0, 0, 1, 4, "bf16"), (0, 0, 6, 1, 1, "bf16")), True),
}


def _tap_matmul(rows: int, dtype: str, dst: tuple) -> str:
    part, bank, off, cols, n, *out = dst
    return (f"matmul in_dtype={dtype} out_dtype={(out or ['fp32'])[0]} rows={rows} cols={cols} acc=single "
            f"src={P._t3('sbuf(0,0x200)', n)} dst={P._t3(f'psum({part},{bank},{off})', n)}")


def _tap_run(a, b, c, b_waits_until=None) -> list:
    eng = Engine("mariana", rows=16, cols=8)
    wait = ""
    if b_waits_until is not None:
        eng.schedule_event(3, b_waits_until - 1)
        wait = " wait=3"
    text = "\n".join([_tap_matmul(5, "fp16", a), _tap_matmul(5, "fp16", b) + wait, _tap_matmul(1, "bf16", c)])
    ops = eng.run(assemble(text, "mariana")).ops
    assert [o.error for o in ops] == [0, 0, 0]
    return ops


@pytest.mark.parametrize("case", TAP_BOXES)
def test_a_higher_tap_waits_for_the_box_of_the_writes_below(case):
    """D-T100's write order with two matmuls leaving at the lower tap: C's first PSUM write follows
    their last write when its cells meet the bounding box of theirs (write_lead after its issue), and
    comes sooner when they do not."""
    (a, b, c), held = TAP_BOXES[case]
    ops = _tap_run(a, b, c)
    lead = timing.write_lead(2, row_tile(Gen.MARIANA, 16), 0, 1)
    last = max(ops[0].t_complete, ops[1].t_complete)
    assert (ops[2].t_issue + lead == last + 1) if held else (ops[2].t_issue + lead <= last)


@pytest.mark.parametrize("b_issue_after_a", [0, 1])
def test_a_box_leaves_the_tap_after_its_last_write(b_issue_after_a):
    """A's box is joined to B's while A still writes at B's issue, up to and including A's last write's
    cycle: B held by an event until that cycle joins it (C, in A's cells, follows B's last write);
    one cycle later A's box is gone and C, meeting B's box nowhere, issues sooner."""
    a, b, c = (0, 0, 0, 1, 1), (0, 1, 0, 1, 2), (0, 0, 0, 1, 1)
    done = _tap_run(a, b, c)[0].t_complete
    ops = _tap_run(a, b, c, b_waits_until=done + b_issue_after_a)
    assert ops[1].t_issue == done + b_issue_after_a
    lead = timing.write_lead(2, row_tile(Gen.MARIANA, 16), 0, 1)
    if b_issue_after_a:
        assert ops[2].t_issue + lead <= ops[1].t_complete
    else:
        assert ops[2].t_issue + lead == ops[1].t_complete + 1
