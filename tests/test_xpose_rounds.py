"""A transpose over several rounds on an array of fewer rows than columns, in the full engine RTL
beside the golden engine (Amaranth's simulator), every cycle.

On a rows x cols array with rows R < cols, row r of a transpose also fetches elements r + j*R
(j < rounds, rtl/rowport.py `xpose_rounds`), which rtl/rows.py delays into the top of column
r + j*R (`top_psum` / `top_valid`).  The library's wide transposes (cosim/programs.py
`transpose_wide`, `transpose_packed`) move exactly rounds x R elements, so every row has every round;
`transpose_rounds` moves R < n < 2R, so some rows have no second round and no row has a later one.

Where an element that does not exist would go: into the top of a column c >= n, in the diagonal of
its own transpose vector (one record per diagonal: a following matmul's sums never share it); the
PEs below pass it down (a transpose's only live PE in row r is column r < n), and the write-back
writes a transpose's record in columns col0 = 0 .. n - 1 only (rtl/writeback.py WriteColumn
`strobe`).  So such a value never reaches PSUM, the status or a register: the PSUM comparison of
the lockstep cannot see it.  This test also compares what enters the top of every column with the
golden engine's transposed elements (model/engine/execute.py's PE log: element (k, n) at the top of
column n in cycle t_data + k + n), which is where a wrong round's valid bit shows."""
import numpy as np
import pytest

from tensore.cosim import lockstep
from tensore.cosim.amaranth_sim import simulate
from tensore.cosim import programs as P
from tensore.model import addrmap
from tensore.model.engine import Engine as Golden
from tensore.model.isa.asm import assemble
from tensore.rtl.rowport import xpose_rounds
from tensore.rtl.top import Engine


class _Watched(Engine):
    """The engine, keeping its row-port unit for the testbench."""

    def _rows(self):
        self.rows_unit = super()._rows()
        return self.rows_unit


def _golden_tops(prog, rows: int) -> dict:
    """{(cycle, column): bits} of the golden engine's transposed elements that enter the top of a
    column >= rows (the columns a row's own PE does not reach)."""
    eng = Golden(prog.gen, rows=prog.rows, cols=prog.cols, sbuf=prog.sbuf_model(), record_pe=True,
                 timing=prog.timing)
    trace = eng.run(assemble(prog.text, prog.gen))
    tops = {}
    for rec in trace.pe_log:
        if rec["kind"] == "xpose":
            ncol, k_all = rec["bits"].shape
            tops |= {(rec["timing"].t_data + k + n, n): int(rec["bits"][n, k])
                     for n in range(rows, ncol) for k in range(k_all)}
    return tops


def _expected_psum(prog, eng) -> list:
    """The (partition, bank) cells where the golden engine's PSUM differs from the program's
    expectations (cosim/programs.py, computed without the engine)."""
    cells = eng.psum.cells(4)
    return [(part, bank) for (part, bank), (off, bits) in prog.expect_fp32.items()
            if not np.array_equal(cells[part, (bank * addrmap.PSUM_BANK_BYTES + off) // 4:][:bits.size], bits)]


def _run(prog):
    """The lockstep of `prog` (None or the first Mismatch), {(cycle, column): bits} of what entered
    the top of each column (`top_valid`) in the run, and the golden engine."""
    lk = lockstep.Lockstep(prog, psum_partitions=16)
    dut = _Watched(prog.gen, prog.rows, prog.cols, pack=lk.pack, psum_partitions=16, psum_ports=lk.psum_ports,
                   timing=prog.timing)
    seen, cycle = {}, [-len(lk.setup)]

    class Port(lockstep.AmaranthPort):
        async def tick(self):
            valid = self.ctx.get(dut.rows_unit.top_valid)
            for c in range(prog.cols):
                if valid >> c & 1:
                    seen[(cycle[0], c)] = self.ctx.get(dut.rows_unit.top_psum[c])
            cycle[0] += 1
            await super().tick()
    result = []

    async def bench(ctx):
        result.append(await lockstep.bench(lk, Port(dut, ctx)))
    simulate(dut, bench)
    return result[0], seen, lk.eng


@pytest.mark.slow
def test_transpose_rounds_lockstep():
    """MAVERICK 4 x 16 (rounds 4): a transpose of 6 elements per partition in the right c128 tile
    (start column 8), then matmuls on the right and the left tile, whose columns (6 .. 15) would
    take a transpose's element that does not exist.  The engine RTL matches the golden engine in
    every cycle's PSUM writes, the status, the registers and the final PSUM; and every column's
    top takes exactly the golden transpose's elements, in the golden cycle (the rounds' valid
    bits, rtl/rowport.py `xfeed_valid`: no element past the transpose's n)."""
    prog = P.transpose_rounds(rows=4, cols=8, n=6)
    assert (prog.rows, prog.cols) == (4, 16) and xpose_rounds(prog.rows, prog.cols) == 4
    bad, seen, eng = _run(prog)
    assert bad is None, str(bad)
    assert not _expected_psum(prog, eng)
    want = _golden_tops(prog, prog.rows)
    assert want and {c for _, c in want} == {4, 5}
    assert seen == want, {"extra": sorted(set(seen) - set(want)), "missing": sorted(set(want) - set(seen))}
