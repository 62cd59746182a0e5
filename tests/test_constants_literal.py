"""The constants of SPEC section 3 written out as numbers, checked in the model and the RTL: D-09's SR
reset states (0x9E3779B9 ^ ((p << 8) | (b << 1) | j)) and the xorshift32 shifts (13, 17, 5) as
state -> next pairs, planted bf16 round-to-nearest-even ties (D-07, D-18) through the engine's PSUM
paths, and fastpaths.repair_ties (D-T53 (3)) reached and needed.

Every expected value here is a literal from SPEC or worked out by hand-written Python below, never
from the model's own constants: a constant changed in its one definition changes model and RTL
alike, so only a number written elsewhere catches it."""
import numpy as np
import pytest
from amaranth.hdl import Module, ResetSignal, Signal
from amaranth.sim import Simulator

from tensore.model.isa.asm import assemble

SPEC_SR_BASE = 0x9E3779B9                     # SPEC D-09, written out
MASK32 = 0xFFFFFFFF


def spec_reset(p: int, b: int, j: int) -> int:
    """D-09's reset state of partition p, bank b, slot j, as SPEC writes it."""
    return SPEC_SR_BASE ^ ((p << 8) | (b << 1) | j)


def hand_xorshift(s: int) -> int:
    """xorshift32 with the shifts 13, 17, 5 (SPEC D-09), on Python ints."""
    s ^= (s << 13) & MASK32
    s ^= s >> 17
    s ^= (s << 5) & MASK32
    return s


# state -> next, worked out with hand_xorshift (1 -> 270369 is Marsaglia's own first value)
XORSHIFT_PAIRS = [(0x00000001, 0x00042021), (0x00042021, 0x04080601), (0x9E3779B9, 0x510C4619),
                  (0x9E377CBE, 0x45B009AE), (0xFFFFFFFF, 0x0003E01F), (0x80000000, 0x80084000),
                  (0x00000000, 0x00000000)]


def test_reset_states_in_the_model():
    """model.psum's reset states (sr_reset_states and a fresh Psum) are SPEC's numbers (D-09)."""
    from tensore.model.psum import Psum, sr_reset_states
    states = sr_reset_states()
    assert states.shape == (128, 8, 2)
    assert int(states[0, 0, 0]) == 0x9E3779B9 and int(states[0, 0, 1]) == 0x9E3779B8
    assert int(states[5, 3, 1]) == 0x9E377CBE and int(states[127, 7, 1]) == 0x9E3706B6
    want = np.array([[[spec_reset(p, b, j) for j in range(2)] for b in range(8)] for p in range(128)], np.uint32)
    assert np.array_equal(states, want)
    assert np.array_equal(Psum().sr_state, want)


def _rtl_states(partition=None, index=None) -> list:
    """The 16 SR states of an RTL PSUM partition after reset, read through its state port: the fixed
    reset values (partition), or those taken from `index` while reset is high."""
    from tensore.rtl.psum import PsumPartition
    dut = PsumPartition(partition)
    top = Module()
    top.submodules.dut = dut
    rst = Signal()
    top.d.comb += ResetSignal().eq(rst)
    got = []

    async def bench(ctx):
        if index is not None:
            ctx.set(dut.index, index)
        ctx.set(rst, 1)
        await ctx.tick()
        ctx.set(rst, 0)
        await ctx.tick()
        for i in range(16):
            ctx.set(dut.state_index, i)
            got.append(ctx.get(dut.state_data))
    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got


@pytest.mark.parametrize("p", [0, 5, 127])
def test_reset_states_in_the_rtl(p):
    """rtl/psum.py's SR registers after reset, both forms (a fixed partition; the `index` input of
    the shared partition block), are SPEC's numbers; state i = 2 * bank + slot (D-09, D-16)."""
    want = [spec_reset(p, i >> 1, i & 1) for i in range(16)]
    assert _rtl_states(partition=p) == want
    assert _rtl_states(index=p) == want
    if p == 5:
        assert want[7] == 0x9E377CBE


def test_xorshift_pairs_in_the_model():
    """model.dtypes.xorshift32 gives the hand-computed next states (shifts 13, 17, 5; 0 stays 0)."""
    from tensore.model.dtypes import xorshift32
    for s, nxt in XORSHIFT_PAIRS:
        assert hand_xorshift(s) == nxt
        assert int(xorshift32(np.uint32(s))) == nxt, hex(s)


def test_xorshift_pairs_in_the_rtl():
    """rtl/rng.py's Xorshift32 steps through the same pairs, and `rand` is the new state's low half."""
    from tensore.rtl.rng import Xorshift32
    for s, nxt in XORSHIFT_PAIRS:
        dut = Xorshift32(s)
        got = []

        async def bench(ctx):
            got.append(ctx.get(dut.rand))
            ctx.set(dut.step, 1)
            await ctx.tick()
            got.append(ctx.get(dut.state))
        sim = Simulator(dut)
        sim.add_clock(1e-8)
        sim.add_testbench(bench)
        sim.run()
        assert got == [nxt & 0xFFFF, nxt], hex(s)


# --- planted bf16 ties through the engine -----------------------------------------------------

BF16 = {1.0: 0x3F80, 2.0 ** -8: 0x3B80, 2.0 ** -7: 0x3C00, 1 + 2.0 ** -7: 0x3F81, 0.0: 0x0000}


def _bf16_code(x: float) -> int:
    return BF16[abs(x)] | (0x8000 if x < 0 else 0)


# moving [row k, vector n] of two matmuls into one BF16 destination, all weights 1: each write is
# column sum a[0, n] + a[1, n] (exact in fp32), rounded to bf16; the second accumulates onto the first
MM1 = [[1.0, 1 + 2.0 ** -7, -1.0, -(1 + 2.0 ** -7)], [2.0 ** -8] * 2 + [-2.0 ** -8] * 2]
MM2 = [[2.0 ** -8, 2.0 ** -7, -2.0 ** -8, -2.0 ** -7], [0.0, 2.0 ** -8, 0.0, -2.0 ** -8]]
# fp32 sums 0x3F808000 (tie: 0x3F80 even), 0x3F818000 (tie: 0x3F82 even) and their negatives; then
# 1 + 2^-8 (tie: 0x3F80) and 0x3F82 + 0x3C40 = 0x3F838000 (tie: 0x3F84), by hand from D-07
WANT_MM1 = [0x3F80, 0x3F82, 0xBF80, 0xBF82]
WANT_MM2 = [0x3F80, 0x3F84, 0xBF80, 0xBF84]
TIE_SUMS = {0x3F808000, 0x3F818000, 0xBF808000, 0xBF818000, 0x3F838000, 0xBF838000}


def _tie_program(gen: str):
    mav = gen == "maverick"
    tile = " tile_size=(row_size_log2=r128, col_size_log2=c128)" if mav else ""
    acc = (["flags=(accumulate_flag=overwrite)", "flags=(accumulate_flag=accumulate)"] if mav else
           ["acc=multi_start", "acc=multi_end"])
    cols = 4                                  # active columns (MAVERICK: one c128 half of an 8-column array)
    sbuf = np.zeros((128, 0x400), np.uint8)
    for k in range(2):
        sbuf[k, 0:2 * cols] = np.array([0x3F80] * cols, "<u2").view(np.uint8)       # weights: 1.0
        for i, mm in enumerate((MM1, MM2)):
            codes = np.array([_bf16_code(x) for x in mm[k]], "<u2")
            sbuf[k, 0x100 + 0x40 * i:0x100 + 0x40 * i + 8] = codes.view(np.uint8)
    text = [f"ldweights in_dtype=bf16 rows=2 cols={cols}{tile} src=(start_addr=sbuf(0,0x0), step_elem=[1,0,0], "
            f"num_elem=[{cols},1,1])"]
    for i in range(2):
        text.append(f"matmul in_dtype=bf16 out_dtype=bf16 rows=2 cols={cols}{tile} {acc[i]} "
                    f"src=(start_addr=sbuf(0,{0x100 + 0x40 * i:#x}), step_elem=[1,0,0], num_elem=[4,1,1]) "
                    f"dst=(start_addr=psum(0,2,0), step_elem=[1,0,0], num_elem=[4,1,1])")
    return "\n".join(text) + "\n", sbuf, cols


@pytest.mark.parametrize("gen", ["mariana", "maverick"])
def test_bf16_ties_through_the_engine(gen, monkeypatch):
    """Ties planted in the column sums and in the accumulate of a BF16 destination round to even
    through the golden engine's PSUM write (D-07, D-18); the bf16 rounding saw the ties, in RNE."""
    from tensore.model import psum as P
    from tensore.model.engine import Engine
    from tensore.model.isa.enums import PsumRound
    seen = []
    real = P.bf16_round

    def spy(values, mode, states=None):
        seen.append((mode, set(np.asarray(values, np.float32).view(np.uint32).ravel().tolist())))
        return real(values, mode, states)
    monkeypatch.setattr(P, "bf16_round", spy)
    text, sbuf, cols = _tie_program(gen)
    eng = Engine(gen, rows=4, cols=2 * cols if gen == "maverick" else cols, sbuf=sbuf)
    trace = eng.run(assemble(text, gen))
    assert not any(o.error or o.fault for o in trace.ops)
    cells = {}                              # (partition, element) -> the bits of each write, in order
    for e in sorted(trace.of_kind("psum_write"), key=lambda e: e.cycle):
        off = e.data["offset"] - 2 * 2048
        cells.setdefault((e.data["partition"], off // 2), []).append(int(e.data["bits"]))
    assert seen and all(m == PsumRound.RNE for m, _ in seen)
    assert TIE_SUMS <= set().union(*(v for _, v in seen))            # the ties reached the rounding
    assert cells == {(p, n): [WANT_MM1[n], WANT_MM2[n]] for p in range(cols) for n in range(4)}
    assert eng.psum.cells(2)[:cols, 2 * 1024:2 * 1024 + 4].tolist() == [WANT_MM2] * cols


# --- fastpaths.repair_ties --------------------------------------------------------------------

def test_repair_ties_is_reached_and_needed(monkeypatch):
    """D-T53 (3): model.array._row_sum_chain runs only when fastpaths.multi_chain declines (folded
    operands beyond fp32's range: here 2^130) and the chain is not exact in float64 (row scales 2^100
    apart); a row sum then adds in float64 and casts.  Row 0 gives 2^100; row 1 adds
    2^76 + 2^36: the float64 sum drops 2^36 and lands on the fp32 tie 2^100 + 2^76, whose cast
    rounds to even (2^100), while the exact sum rounds up to 2^100 + 2^77.  repair_ties must see
    the tie and redo it exactly."""
    from tensore.model import array as A
    from tensore.model import fastpaths as F
    calls = []
    real = F.repair_ties

    def spy(*args, **kw):
        calls.append(args[2].size)
        return real(*args, **kw)
    monkeypatch.setattr(F, "repair_ties", spy)
    w = np.array([[[1.0], [0.0]], [[1.0], [1.0]]])                  # [rows, pack, M]
    a = np.array([[[1.0], [0.0]], [[1.0], [2.0 ** -40]]])           # [rows, pack, N]
    scales = (np.array([[130.0], [38.0]]), np.array([[-30.0], [38.0]]))
    got = A.column_chain(w, a, scales=scales)
    assert calls == [1]
    assert int(np.asarray(got, np.float32).view(np.uint32)[0, 0]) == 0x71800001   # 2^100 + 2^77


def test_repair_ties_sees_a_tie_at_an_odd_last_bit():
    """The same chain, the tie above an odd last bit: row 0 gives 2^100 + 2^77 (fp32's last bit at
    2^100 is 2^77), row 1 adds 2^76 - 2^36; the float64 sum drops the -2^36 and lands on the tie
    2^100 + 2^77 + 2^76, whose cast rounds to even (2^100 + 2^78), while the exact sum lies below the
    tie and rounds down to 2^100 + 2^77.  fastpaths.MID_MASK looks at the 29 bits below fp32's last
    bit only: one more would take this tie (last bit 1) for none."""
    from fractions import Fraction

    from tensore.cosim.oracle import rne_fp32
    from tensore.model import array as A
    w = np.array([[[1.0], [1.0]], [[1.0], [1.0]]])                  # [rows, pack, M]
    a = np.array([[[1.0], [2.0 ** -23]], [[1.0], [-(2.0 ** -40)]]])  # [rows, pack, N]
    scales = (np.array([[130.0], [38.0]]), np.array([[-30.0], [38.0]]))
    got = np.asarray(A.column_chain(w, a, scales=scales), np.float32)[0, 0]
    row0 = Fraction(2) ** 100 + Fraction(2) ** 77
    want = rne_fp32(Fraction(rne_fp32(row0)) + Fraction(2) ** 76 - Fraction(2) ** 36)
    assert want == 2.0 ** 100 + 2.0 ** 77 and float(got) == want


def test_sr_adds_all_16_random_bits():
    """PSUM's SR rounding (SPEC D-09) adds the low 16 bits of the advanced xorshift32 state to the fp32
    pattern and keeps the top 16: with an odd random word r, a pattern whose low half is 0x10000 - r
    rounds up, and one less rounds down (the last random bit decides)."""
    from tensore.model.isa.enums import PsumRound
    from tensore.model.psum import bf16_round
    state = next(s for s in range(1, 100) if hand_xorshift(s) & 1)
    r = hand_xorshift(state) & 0xFFFF
    for low, code in ((0x10000 - r, 0x3F81), (0xFFFF - r, 0x3F80)):
        bits = np.array([0x3F800000 | low], dtype=np.uint32)
        codes, new = bf16_round(bits.view(np.float32), PsumRound.SR, np.array([state], dtype=np.uint32))
        assert int(codes[0]) == code and int(new[0]) == hand_xorshift(state), hex(low)
