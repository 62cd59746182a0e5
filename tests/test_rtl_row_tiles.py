"""The RTL's row tiles side by side (D-T100, the default `public` profile) on Verilator and Amaranth's
simulator, in lockstep with the golden engine every cycle: a launch unit per tile feeding the request chain at the
tile's first row, the write records and sums leaving at the tap below each matmul's tiles, the
write-back taking the taps from the top."""
from dataclasses import replace

import numpy as np
import pytest

from tensore.cosim import hdl, lockstep
from tensore.cosim import programs as P
from tests.test_row_tiles import _tile_race_program, taps_program


def _entry_program(n: int = 8):
    """A matmul on rows 4..7 (columns 4..7) right after one over all 8 rows (columns 0..3): its stream
    enters at row 4 once the first one's has passed, its sums leave at the bottom beside the first's;
    then one on row 2 alone, whose sums leave at the tap below its tile (row 3)."""
    b = P._Builder("tile_entry_rtl", "mariana", 8, 8, 7)
    a = b.put(0, b.values("bf16", (8, n)), 2)
    w = b.put(0, b.values("bf16", (8, 4)), 2)
    b.line(f"ldweights in_dtype=bf16 rows=4 cols=4 row_grp=2 col_grp=1 flags=(load_order=first_col_first) "
           f"src={P._t3(f'sbuf(4,{w:#x})', 4)}")
    b.line(f"ldweights in_dtype=bf16 rows=8 cols=4 flags=(load_order=first_col_first) src={P._t3(f'sbuf(0,{w:#x})', 4)}")
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows=8 cols=4 acc=single "
           f"src={P._t3(f'sbuf(0,{a:#x})', n)} dst={P._t3('psum(0,0,0)', n)}")
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows=4 cols=4 row_grp=2 col_grp=1 acc=single "
           f"src={P._t3(f'sbuf(4,{a:#x})', n)} dst={P._t3('psum(0,1,0)', n)}")
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows=1 cols=4 row_grp=1 acc=single "
           f"src={P._t3(f'sbuf(2,{a:#x})', n)} dst={P._t3('psum(0,2,0)', n)}")
    return replace(b.done(), timing="public")


def _transpose_program():
    b = P._Builder("tile_xpose_rtl", "mariana", 8, 8, 5)
    a = b.put(0, b.rng.integers(0, 1 << 16, (8, 6), dtype=np.uint64), 2)
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows=4 cols=8 row_grp=2 flags=(xpose_mode=enabled) acc=single "
           f"src={P._t3(f'sbuf(4,{a:#x})', 6)} dst={P._t3('psum(0,2,0)', 4)}")
    return replace(b.done(), timing="public")


def _programs():
    """Two tiles accumulating into one cell in one cycle (taps_program), a tile's stream entering
    below a longer one and a third on another tile beside it, two load + matmul pairs on one tile, a
    transpose (not tiled)."""
    return [taps_program("multi_end"), _entry_program(), _tile_race_program(), _transpose_program()]


@pytest.mark.verilator
@pytest.mark.xdist_group("tiles")
def test_row_tiles_on_verilator():
    """The programs on the exported engine (the row ports', the array's loop form and the crossbar's
    writers with their taps) on Verilator: every PSUM write of every cycle as the golden engine's."""
    progs = _programs()
    results = hdl.run_many(progs)
    assert [r.mismatch for r in results] == [None] * len(progs)
    assert all(r.checks > r.cycles for r in results)


@pytest.mark.cosim                      # the same on Amaranth's simulator: make cosim
def test_row_tiles_in_lockstep():
    """The programs in lockstep on Amaranth's simulator."""
    progs = _programs()
    assert lockstep.run_many(progs) == [None] * len(progs)


def _maverick_program(n: int = 10):
    """MAVERICK's r64 tiles of a 4 x 16 array: a c256 matmul of more vectors than half its columns on
    the lower tile (its two column halves' writes into one partition, told apart by its first
    vector's mark, which enters at the tile's first row) beside one on the upper tile."""
    b = P._Builder("tile_c256", "maverick", 4, 8, 11)
    a = b.put(0, b.values("bf16", (4, n)), 2)
    for sel in (1, 0):
        w = b.put(0, b.values("bf16", (4, 16)), 2)
        t = f"tile_size=(row_size_log2=r64, col_size_log2=c256) tile_sel=(row_sel={sel}, col_sel=0) "
        b.line(f"ldweights in_dtype=bf16 rows=2 cols=0 {t}flags=(load_order=first_col_first) "
               f"src={P._t3(f'sbuf({2 * sel},{w:#x})', 16)}")
    for sel, bank in ((1, 4), (0, 6)):
        t = f"tile_size=(row_size_log2=r64, col_size_log2=c256) tile_sel=(row_sel={sel}, col_sel=0) "
        b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows=2 cols=0 {t}flags=(accumulate_flag=overwrite) "
               f"src={P._t3(f'sbuf({2 * sel},{a:#x})', n)} "
               f"dst=(start_addr=psum(0,{bank},0), step_elem=[1,0,512], num_elem=[{n},1,2])")
    return replace(b.done(), timing="public")


def test_maverick_tiles_in_lockstep():
    """MAVERICK's two r64 tiles, c256 on each, side by side."""
    prog = _maverick_program()
    trace = prog.golden()[1]
    assert not any(o.error for o in trace.ops), [o.violations for o in trace.ops if o.error]
    mm = [o for o in trace.ops if o.desc.op.name == "MATMUL"]
    assert mm[1].t_issue < mm[0].t_complete                    # side by side
    assert lockstep.run(prog) is None


def tiles_row_program(gen: str, n: int = 16, pairs: int = 8):
    """The public table's tiles row on an 8 x 8 array: weight load + matmul pairs alternating between
    the upper and the lower half (row_grp 0 and 2, four rows each), n vectors each into banks 0..7."""
    b = P._Builder(f"tiles_row_{gen}", gen, 8, 8, 13)
    order = "load_order=first_col_first" if gen == "cayman" else "flags=(load_order=first_col_first)"
    a = b.put(0, b.values("bf16", (8, n)), 2)
    for i in range(pairs):
        grp, row = 2 * (i % 2), 4 * (i % 2)
        w = b.put(0, b.values("bf16", (8, 8)), 2)
        b.line(f"ldweights in_dtype=bf16 rows=4 cols=8 row_grp={grp} {order} src={P._t3(f'sbuf({row},{w:#x})', 8)}")
        b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows=4 cols=8 row_grp={grp} acc=single "
               f"src={P._t3(f'sbuf({row},{a:#x})', n)} dst={P._t3(f'psum(0,{i},0)', n)}")
    return replace(b.done(), timing="public")


@pytest.mark.verilator
@pytest.mark.parametrize("gen", ["cayman", "mariana"])
def test_the_tiles_row_on_verilator(gen):
    """The public table's tiles row (two half-array tiles, N vectors each: N cycles per pair, the
    public model's figure; one after another under `contract`, twice that and more) in lockstep with
    the golden engine on the exported RTL, every cycle."""
    prog, n = tiles_row_program(gen), 16
    mms = {}
    for name in ("public", "contract"):
        trace = replace(prog, timing=name).golden()[1]
        assert not any(o.error for o in trace.ops), [o.violations for o in trace.ops if o.error]
        mms[name] = [o.t_issue for o in trace.ops if o.desc.op.name == "MATMUL"]
    pairs = {name: {t[i + 2] - t[i] for i in range(1, len(t) - 3, 2)} for name, t in mms.items()}
    assert pairs["public"] == {n} and min(pairs["contract"]) > 2 * n, pairs
    [res] = hdl.run_many([prog])
    assert res.mismatch is None and res.checks > res.cycles
