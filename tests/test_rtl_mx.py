"""MX addressing (rtl/mx.py, D-T25, D-T40 (5)): the SBUF ports' element map against the model's data
pattern, and the stationary gather's pattern of element indices (rtl/load_unit.py mx_pattern) against
the golden engine's element order, for every order, pack and column count; an MX matmul's block
scales through the load path into the PEs, in the full engine beside the golden engine."""
from types import SimpleNamespace

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from tensore.cosim import lockstep
from tensore.cosim import programs as P
from tensore.model import addrmap
from tensore.model.engine import Engine
from tensore.model.isa.microop import MxOrder, Pattern
from tensore.rtl.config import Config
from tensore.rtl.isa import MxOrder as HwOrder
from tensore.rtl.isa import uop_layout
from tensore.rtl.load_unit import mx_pattern
from tensore.rtl.mx import mapped


@pytest.mark.parametrize("seed", range(3))
def test_map_is_the_data_pattern(seed):
    """Index e of a 2-D MX data pattern (model.isa.microop.Pattern, MXTensorV2 and MXMEM_PATTERN1D
    forms) sits at mapped(e, n0, s0, s1)."""
    rng = np.random.default_rng(seed)
    for _ in range(50):
        n0, n1 = (int(x) for x in rng.integers(1, 40, 2))
        s0, s1 = int(rng.choice([1, int(rng.integers(-5, 6))])), int(rng.integers(-300, 300))
        if rng.random() < 0.3:                  # MXMEM_PATTERN1D: one dim
            n1, s1 = 1, 0
        offs = Pattern(0, (s0, s1), (n0, n1)).elements()
        assert [mapped(e, n0, s0, s1) for e in range(n0 * n1)] == offs.tolist()


def _positions(steps, nums, count):
    """A TENSOR3D pattern's positions, dim 0 fastest (the stationary port's gather), first `count`."""
    i = np.indices(nums[::-1]).reshape(3, -1)[::-1]
    return (i[0] * steps[0] + i[1] * steps[1] + i[2] * steps[2])[:count]


def test_stationary_gather_is_the_element_order():
    """Position m * pack + j of a weight row's gather names the element index of lane m, slot j in
    the golden engine's order (Engine._element_order) for each order, pack and column count."""
    cur = Signal(uop_layout())
    m = Module()
    steps, nums = mx_pattern(cur)
    outs = [Signal(16, name=f"s{d}") for d in range(3)] + [Signal(16, name=f"n{d}") for d in range(3)]
    m.d.comb += [o.eq(v) for o, v in zip(outs, steps + nums)]
    cases = [(order, pack, cols) for order in MxOrder for pack in (4, 8) for cols in (1, 3, 4, 31, 32, 64, 96, 128)]
    got = []

    async def bench(ctx):
        for order, pack, cols in cases:
            ctx.set(cur.mxmode, HwOrder(int(order)))
            ctx.set(cur.pack, pack)
            ctx.set(cur.cols, cols)
            v = [ctx.get(o) for o in outs]
            got.append(([x - (1 << 16) if x >> 15 else x for x in v[:3]], v[3:]))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    for (order, pack, cols), (st, nm) in zip(cases, got):
        want = Engine._element_order(None, SimpleNamespace(mxmode=order, pack=pack), cols).reshape(-1)
        assert _positions(st, nm, cols * pack).tolist() == want.tolist(), (order, pack, cols)


@pytest.mark.parametrize("order,pack,vectors", [(MxOrder.PACKED, 4, 5), (MxOrder.INTERLEAVE, 8, 7),
                                                (MxOrder.TILED, 4, 12), (MxOrder.TILED, 8, 70)])
def test_moving_indices_are_the_element_order(order, pack, vectors):
    """The launch unit's records name vector v's codes as indices elem + j * stride (rtl/launch.py), the
    golden engine's element order of (v, j) (Engine._element_order)."""
    from tensore.rtl.isa import Kind
    from tensore.rtl.launch import Launch
    dut = Launch(Config("maverick", 4, 4, 8))
    got = []

    async def bench(ctx):
        u = dut.issue.uop
        ctx.set(u.kind, Kind.MATMUL)
        ctx.set(u.supported, 1)
        ctx.set(u.mx, 1)
        ctx.set(u.mxmode, HwOrder(int(order)))
        ctx.set(u.pack, pack)
        ctx.set(u.vectors, vectors)
        ctx.set(u.passes, 1)
        ctx.set(dut.issue.valid, 1)
        for cycle in range(vectors + 3):
            ctx.set(dut.now, cycle)
            r = dut.feed.rec
            if ctx.get(r.valid):
                got.append([ctx.get(r.melem) + j * ctx.get(r.mstride) for j in range(pack)])
            await ctx.tick()
            ctx.set(dut.issue.valid, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    want = Engine._element_order(None, SimpleNamespace(mxmode=order, pack=pack), vectors)
    assert got == want.tolist()


@pytest.mark.slow
def test_mx_block_scales_in_lockstep():
    """A MAVERICK MX matmul (FP8_EXP4, quad row) whose weights and moving data carry E8M0 block
    scales 2^-9 .. 2^8 (cosim/programs.py mx_rows): the golden engine writes the oracle's scaled
    product (cosim/oracle.py), and the engine RTL (Amaranth's simulator, 8 x 4) matches it in every
    cycle's PSUM writes.  The weights' scales ride the load path's lanes (rtl/load_unit.py) to the
    PEs: a load that drops them writes other sums."""
    prog = P.mx_rows("maverick", "fp8_e4m3", "quad_row", 8, 4, n=8, n0=(8, 4), gap=3)
    eng, trace, _ = prog.golden()
    assert not trace.stalled and all(o.error == 0 for o in trace.ops)
    cells = eng.psum.cells(4)
    for (part, bank), (off, bits) in prog.expect_fp32.items():
        start = (bank * addrmap.PSUM_BANK_BYTES + off) // 4
        assert np.array_equal(cells[part, start:start + bits.size], bits), (part, bank)
    assert prog.expect_fp32
    assert lockstep.run_many([prog], psum_partitions=8) == [None]
