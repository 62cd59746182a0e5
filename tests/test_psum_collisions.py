"""PSUM write collisions (D-T40 (6)): several writes to one PSUM partition, or to one
word, in one cycle.  The golden engine applies a cycle's writes micro-op by micro-op in program order,
a c256 micro-op's column half 0 before half 1; the engine RTL takes them through the partition's write
ports in that order.  Each program is checked three ways: the collisions it is built for occur in the
golden trace, the golden PSUM equals values computed without the engine (cosim/oracle.py, explicit
xorshift and stochastic rounding), and the RTL runs it in lockstep with the golden engine."""
import ml_dtypes
import numpy as np
import pytest

from tensore.cosim import lockstep
from tensore.cosim.amaranth_sim import simulate
from tensore.cosim.oracle import add_f32, matmul
from tensore.cosim.programs import Program, _t3
from tensore.model import addrmap
from tensore.model.dtypes import Dtype, Gen
from tensore.model.engine import Engine
from tensore.model.isa.asm import assemble
from tensore.model.psum import SR_STATE_BASE
from tests.fixtures import bank_mask

SEED = 20261201
SBUF = 0x1000
C256 = "tile_size=(row_size_log2=r128, col_size_log2=c256)"
BANK_CELLS = addrmap.PSUM_BANK_BYTES // 4


class _Build:
    """A program's SBUF (bf16 operands, the word 1 for PSUM_ROUND at 0xF00) and text."""

    def __init__(self, name, gen, rows, cols, seed):
        self.p = Program(name, Gen.parse(gen), rows, cols, "", np.zeros((addrmap.PARTITIONS, SBUF), np.uint8))
        self.p.sbuf[0, 0xF00] = 1
        self.rng, self.free, self.lines = np.random.default_rng(seed), 0x100, []

    def operand(self, k, n):
        """A [k, n] bf16 operand at a fresh offset (row r in partition r): (codes, offset)."""
        codes = (self.rng.standard_normal((k, n)) * 2).astype(ml_dtypes.bfloat16).view(np.uint16)
        off, self.free = self.free, self.free + 2 * n + 0x40
        self.p.sbuf[:k, off:off + 2 * n] = codes.view(np.uint8).reshape(k, 2 * n)
        return codes, off

    def done(self):
        self.p.text = "\n".join(self.lines) + "\n"
        return self.p


def _xorshift(s):
    s ^= (s << 13) & 0xFFFFFFFF
    s ^= s >> 17
    return s ^ ((s << 5) & 0xFFFFFFFF)


def _sr_bf16(x, r):
    """D-08 for finite values: (u + r) >> 16 on the fp32 pattern."""
    return ((int(np.float32(x).view(np.uint32)) + r) >> 16) & 0xFFFF


def _widen(code):
    return np.uint32(int(code) << 16).view(np.float32)


def _add(old, value):
    """One PSUM accumulate of scalars (the oracle's RNE fp32 add)."""
    return add_f32(np.float32([old]), np.float32([value]))[0]


def col_groups(gen="cayman", n_ops=2, bf16_sr=False, seed=1):
    """`n_ops` matmuls on column groups n_ops-1 ... 0 of an 8 x 8 array (2 columns each, 2 vectors),
    into the same cells of bank 0: the first overwrites, the others accumulate.  Each issues two
    cycles after the one before on columns two lower (a column's outputs reach PSUM a cycle before
    the next column's), so all write each cell in the same cycle.  MARIANA with `bf16_sr`: BF16 cells, stochastic rounding, one SR state per cell a cycle."""
    b = _Build(f"col_groups{n_ops}" + ("_sr" if bf16_sr else ""), gen, 8, 8, seed)
    mariana = b.p.gen >= Gen.MARIANA
    lo = "flags=(load_order=first_col_first)" if mariana else "load_order=first_col_first"
    out = "out_dtype=bf16 " if bf16_sr else ("out_dtype=fp32 " if mariana else "")
    if bf16_sr:
        b.lines.append("pe_reg_write reg=psum_round src=(start_addr=sbuf(0,0xf00), step_elem=[1], num_elem=[1])")
    groups = list(reversed(range(n_ops)))
    ops = [(b.operand(8, 2), b.operand(8, 2)) for _ in groups]
    for g, ((_, ow), _) in zip(groups, ops):
        b.lines.append(f"ldweights in_dtype=bf16 rows=8 cols=2 col_grp={g} {lo} "
                       f"src=(start_addr=sbuf(0,{ow:#x}), step_elem=[1,0,0], num_elem=[2,1,1])")
    for i, (g, (_, (_, oa))) in enumerate(zip(groups, ops)):
        b.lines.append(f"matmul in_dtype=bf16 {out}rows=8 cols=2 col_grp={g} acc={'single' if i == 0 else 'multi_mid'} "
                       f"src=(start_addr=sbuf(0,{oa:#x}), step_elem=[1,0,0], num_elem=[2,1,1]) "
                       f"dst=(start_addr=psum(0,0,0), step_elem=[1,0,0], num_elem=[2,1,1])")
    sums = [matmul(w, a, in_dtype=Dtype.BFLOAT16, gen=b.p.gen) for (w, _), (a, _) in ops]     # [2 cols, 2 vectors]
    if not bf16_sr:
        total = sums[0]
        for s in sums[1:]:
            total = add_f32(total, s)
        for p in range(2):
            b.p.expect_fp32[(p, 0)] = (0, total[p].view(np.uint32))
        return b.done()
    for p in range(2):                     # ops in program order; each cell's state (parity v) once per op
        cells = np.zeros(2, np.uint16)
        for v in range(2):
            state = SR_STATE_BASE ^ ((p << 8) | v)
            for i, s in enumerate(sums):
                state = _xorshift(state)
                value = s[p, v] if i == 0 else _add(_widen(cells[v]), s[p, v])
                cells[v] = _sr_bf16(value, state & 0xFFFF)
        b.p.expect_bf16[(p, 0)] = (0, cells)
    return b.done()


def c256_one_cell(n=12, seed=2):
    """MAVERICK 8 x 16, one c256 matmul of n > 8 vectors accumulating every product into one BF16
    cell per partition with stochastic rounding: from vector 8 on, both column halves write the
    cell in one cycle, half 0 first, each advancing the cell's SR state."""
    b = _Build("c256_one_cell", "maverick", 8, 16, seed)
    (w, ow), (a, oa) = b.operand(8, 16), b.operand(8, n)
    b.lines += ["pe_reg_write reg=psum_round src=(start_addr=sbuf(0,0xf00), step_elem=[1], num_elem=[1])",
                (f"ldweights in_dtype=bf16 rows=8 cols=0 {C256} flags=(load_order=first_col_first) "
                 f"src=(start_addr=sbuf(0,{ow:#x}), step_elem=[1,0,0], num_elem=[16,1,1])"),
                (f"matmul in_dtype=bf16 out_dtype=bf16 rows=8 cols=0 {C256} flags=(accumulate_flag=accumulate) "
                 f"src=(start_addr=sbuf(0,{oa:#x}), step_elem=[1,0,0], num_elem=[{n},1,1]) "
                 f"dst=(start_addr=psum(0,2,6), step_elem=[0,0,0], num_elem=[{n},1,2])")]
    ref = matmul(w, a, in_dtype=Dtype.BFLOAT16, gen=b.p.gen)                  # [16, n]
    for p in range(8):
        # column p writes vector v in cycle p + v, column p + 8 in p + 8 + v; half 0 first
        order = sorted([(p + v, 0, v) for v in range(n)] + [(p + 8 + v, 1, v) for v in range(n)])
        cell, state = np.uint16(0), SR_STATE_BASE ^ ((p << 8) | (2 << 1) | 1)     # element 3: parity 1
        for _, half, v in order:
            state = _xorshift(state)
            cell = _sr_bf16(_add(_widen(cell), ref[p + 8 * half, v]), state & 0xFFFF)
        b.p.expect_bf16[(p, 2)] = (6, np.array([cell], np.uint16))
    return b.done()


def c256_back_to_back(n=16, bf16_sr=False, seed=3):
    """MAVERICK 8 x 16, two c256 matmuls of n vectors one after the other (n >= 16, the issue floor of a 16-column matmul): the first's half-1 write
    of element n + v and the second's half-0 write of element 2n - 8 + v' (v' = v + 8 - n) reach a
    partition in one cycle, the same cell: the first's goes first.  FP32 cells (the second
    accumulates), or with `bf16_sr` BF16 cells with stochastic rounding (see the test below)."""
    b = _Build("c256_back_to_back" + ("_sr" if bf16_sr else ""), "maverick", 8, 16, seed)
    (w, ow), (a0, o0), (a1, o1) = b.operand(8, 16), b.operand(8, n), b.operand(8, n)
    out = "bf16" if bf16_sr else "fp32"
    if bf16_sr:
        b.lines.append("pe_reg_write reg=psum_round src=(start_addr=sbuf(0,0xf00), step_elem=[1], num_elem=[1])")
    b.lines.append(f"ldweights in_dtype=bf16 rows=8 cols=0 {C256} flags=(load_order=first_col_first) "
                   f"src=(start_addr=sbuf(0,{ow:#x}), step_elem=[1,0,0], num_elem=[16,1,1])")
    esize = 2 if bf16_sr else 4
    for acc, oa, first in (("overwrite", o0, 0), ("accumulate", o1, 2 * n - 8)):
        b.lines.append(f"matmul in_dtype=bf16 out_dtype={out} rows=8 cols=0 {C256} flags=(accumulate_flag={acc}) "
                       f"src=(start_addr=sbuf(0,{oa:#x}), step_elem=[1,0,0], num_elem=[{n},1,1]) "
                       f"dst=(start_addr=psum(0,4,{esize * first:#x}), step_elem=[1,0,{n}], num_elem=[{n},1,2])")
    if not bf16_sr:
        r0, r1 = (matmul(w, a, in_dtype=Dtype.BFLOAT16, gen=b.p.gen) for a in (a0, a1))
        cells = np.zeros((8, 4 * n - 8), np.float32)
        for p in range(8):
            cells[p, :2 * n] = np.concatenate([r0[p], r0[p + 8]])
            second = np.concatenate([r1[p], r1[p + 8]])
            cells[p, 2 * n - 8:] = add_f32(cells[p, 2 * n - 8:], second)
            b.p.expect_fp32[(p, 4)] = (0, cells[p].view(np.uint32))
    return b.done()


def _older_younger(name, gen, seed, older, younger):
    """A one-vector bf16 matmul on column group 2 (older), then one on group 0 (younger), 8 x 8, each
    `(cols, acc, PSUM destination, out dtype or None for the default)`: the younger's columns are
    nearer the PSUM, so its writes come first where their cells meet."""
    b = _Build(name, gen, 8, 8, seed)
    order = "load_order=first_col_first" if Gen.parse(gen) == Gen.CAYMAN else "flags=(load_order=first_col_first)"
    ops = [(b.operand(8, mm[0]), b.operand(8, 1)) for mm in (older, younger)]
    for g, (cols, *_), ((_, ow), _) in zip((2, 0), (older, younger), ops):
        b.lines.append(f"ldweights in_dtype=bf16 rows=8 cols={cols} col_grp={g} {order} "
                       f"src=(start_addr=sbuf(0,{ow:#x}), step_elem=[1,0,0], num_elem=[{cols},1,1])")
    for g, (cols, acc, dst, out), (_, (_, oa)) in zip((2, 0), (older, younger), ops):
        out = f"out_dtype={out} " if out else ""
        b.lines.append(f"matmul in_dtype=bf16 {out}rows=8 cols={cols} col_grp={g} acc={acc} "
                       f"src=(start_addr=sbuf(0,{oa:#x}), step_elem=[1,0,0], num_elem=[1,1,1]) "
                       f"dst=(start_addr={dst}, step_elem=[1,0,0], num_elem=[1,1,1])")
    return b.done()


def older_writes_later(seed=4):
    """CAYMAN 8 x 8: a one-vector matmul on column group 2 (overwrite), then one on group 0
    (accumulate) into the same cell: the second writes it two cycles before the first does."""
    return _older_younger("older_writes_later", "cayman", seed, (2, "single", "psum(0,0,0)", None),
                          (2, "multi_mid", "psum(0,0,0)", None))


def older_writes_later_mixed(seed=5):
    """older_writes_later on MARIANA with the younger matmul's output bf16 into the upper half-word of
    the older's fp32 cell (byte 2 of it): the younger's bf16 write comes first, the older's fp32 write
    of the whole cell two cycles later."""
    return _older_younger("older_writes_later_mixed", "mariana", seed, (2, "multi_mid", "psum(0,0,0)", "fp32"),
                          (2, "multi_mid", "psum(0,0,2)", "bf16"))


def older_zeroes_later(seed=4):
    """CAYMAN 8 x 8: a one-vector matmul on column group 2 (overwrite: it zeroes bank 0 of partitions
    1..2) into partitions 1..2, then one on group 0 (accumulate) into byte 8 of partitions 0..1: the
    second's writes come two and one cycles before the first's zeroing."""
    return _older_younger("older_zeroes_later", "cayman", seed, (2, "single", "psum(1,0,0)", None),
                          (2, "multi_mid", "psum(0,0,8)", None))


def shared_partition(p_old, p_young, c_old, c_young, accs, seed=4):
    """CAYMAN 8 x 8: an older matmul on column group 2 (c_old columns into PSUM partitions p_old..) and a
    younger one on group 0 (c_young columns into p_young..), byte 0 of bank 0, one vector each, with
    the accumulate flags `accs`: the two share partition max(p_old, p_young), whose cell the younger
    writes first (its columns are nearer the PSUM)."""
    return _older_younger("shared_partition", "cayman", seed, (c_old, accs[0], f"psum({p_old},0,0)", None),
                          (c_young, accs[1], f"psum({p_young},0,0)", None))


# -- the collisions each program is built for, in the golden trace -------------------------------------

def _most_per_cycle(program):
    """(most writes to one partition in one cycle, most to one cell in one cycle) of the golden run."""
    _, trace, _ = lockstep.golden(program)
    parts, cells = {}, {}
    for e in trace.of_kind("psum_write"):
        key = (e.cycle, e.data["partition"])
        parts[key] = parts.get(key, 0) + 1
        cells[key + (e.data["offset"],)] = cells.get(key + (e.data["offset"],), 0) + 1
    return max(parts.values()), max(cells.values())


@pytest.mark.parametrize("build,most", [
    (lambda: col_groups("cayman", 2), (2, 2)), (lambda: col_groups("cayman", 3), (3, 3)),
    (lambda: col_groups("mariana", 2, bf16_sr=True), (2, 2)), (c256_one_cell, (2, 2)),
    (c256_back_to_back, (2, 2)), (lambda: c256_back_to_back(bf16_sr=True), (2, 2))],
    ids=["cayman2", "cayman3", "mariana_sr", "c256_one_cell", "c256_back_to_back", "c256_back_to_back_sr"])
def test_programs_collide_in_the_golden_engine(build, most):
    """Each program has the collisions it is built for (writes to one partition, to one cell, in one
    cycle), and the golden PSUM holds the values computed without the engine."""
    program = build()
    assert _most_per_cycle(program) == most
    eng, _, _ = lockstep.golden(program)
    for (p, bank), (off, bits) in program.expect_fp32.items():
        got = eng.psum.cells(4)[p, bank * BANK_CELLS + off // 4:][:len(bits)]
        assert np.array_equal(got, bits), (p, bank)
    for (p, bank), (off, codes) in program.expect_bf16.items():
        got = eng.psum.cells(2)[p, bank * 2 * BANK_CELLS + off // 2:][:len(codes)]
        assert np.array_equal(got, codes), (p, bank)


# -- the RTL in lockstep --------------------------------------------------------------------------------

def _lockstep(program, ports):
    """`program` on an engine whose partitions take `ports` writes a cycle, every monitor compared."""
    return lockstep.run(program, psum_partitions=8, psum_ports=ports)


def test_cosim_fits_the_write_ports_to_the_program():
    """The engine cosim builds has as many write ports per partition as the program's most writes to
    one partition in a cycle (at least the default two); asking for fewer is a one-line error."""
    from tensore.cosim import hdl
    three, two = lockstep.Lockstep(col_groups("cayman", 3), psum_partitions=8), \
        lockstep.Lockstep(col_groups("cayman", 2), psum_partitions=8)
    assert (three.need_ports, two.need_ports) == (3, 2)
    assert hdl.fit_ports([two]) == 2 and two.monitors == ("mon", "mon2")
    assert hdl.fit_ports([two, three]) == 3 and two.monitors == three.monitors == ("mon", "mon2", "mon3")
    with pytest.raises(ValueError, match="writes 3 times to one PSUM partition in a cycle.*built with 2"):
        hdl.fit_ports([three], 2)
    cfg = hdl.Config.of(three.program, psum_ports=3)
    assert cfg.label.endswith("_w3") and hdl.Config.of(three.program).label.endswith("_ps16")


@pytest.mark.slow
@pytest.mark.cosim
def test_three_writes_on_the_compiled_harness():
    """The compiled Verilator harness on the engine fitted with three write ports records all three
    monitors."""
    from tensore.cosim import hdl
    res = hdl.run(col_groups("cayman", 3), psum_partitions=8, opt="-O0")
    assert res.mismatch is None and res.build and "_w3" in res.build["exported"]["dir"], str(res.mismatch)


@pytest.mark.slow
def test_two_matmuls_one_cell_one_cycle():
    """CAYMAN: two micro-ops' writes to one cell in one cycle: the second accumulates onto the first's."""
    bad = lockstep.run(col_groups("cayman", 2), psum_partitions=8)
    assert bad is None, str(bad)


@pytest.mark.slow
@pytest.mark.cosim
def test_three_writes_need_three_ports():
    """Three writes to one cell in one cycle: an engine built with three write ports per partition
    runs them; the default two-port engine raises `unsupported` (a build choice) and drops the third."""
    program = col_groups("cayman", 3)
    assert _lockstep(program, 3) is None
    bad = _lockstep(program, 2)
    assert bad is not None and "PSUM partition 0 write" in bad.where and len(bad.expected) == 3, str(bad)


@pytest.mark.slow
@pytest.mark.cosim
def test_bf16_sr_one_cell_one_cycle():
    """MARIANA, BF16 cells with stochastic rounding: two micro-ops' writes to one cell in one cycle
    draw from the cell's SR state in program order."""
    bad = lockstep.run(col_groups("mariana", 2, bf16_sr=True), psum_partitions=8)
    assert bad is None, str(bad)


@pytest.mark.slow
@pytest.mark.cosim
def test_c256_collisions():
    """MAVERICK c256: a micro-op's two column halves into one cell per cycle (SR), and two micro-ops'
    writes to one cell in one cycle, the first micro-op's half 1 before the second's half 0."""
    results = lockstep.run_many([c256_one_cell(), c256_back_to_back()], psum_partitions=8)
    assert results == [None, None], [str(r) for r in results]


@pytest.mark.slow
@pytest.mark.cosim
def test_c256_back_to_back_sr_states_in_cycle_order():
    bad = lockstep.run(c256_back_to_back(bf16_sr=True), psum_partitions=8)
    assert bad is None, str(bad)


def test_golden_writes_replay_in_cycle_order():
    """The golden PSUM equals the golden trace's writes applied in cycle order (what the RTL does)."""
    eng, trace, _ = lockstep.golden(older_writes_later())
    assert np.array_equal(trace.replay_psum().cells(4)[:2, :4], eng.psum.cells(4)[:2, :4])


# -- one partition alone ----------------------------------------------------------------------------------

def test_partition_writes_of_one_cycle_in_port_order():
    """A PsumPartition with three write ports, its writes of a cycle mostly to the same few cells
    (fp32 and bf16 halves, accumulate, RNE and SR, raw) and zeroing: the same cells and SR states as
    model.psum applying each cycle's writes in port order."""
    from tensore.model.isa.enums import PsumRound
    from tensore.model.psum import Psum
    from tensore.rtl.psum import PsumPartition
    rng, part, ports, n = np.random.default_rng(SEED), 3, 3, 300
    offs = [b * addrmap.PSUM_BANK_BYTES + 4 * w + 2 * h for b in (0, 5) for w in range(2) for h in range(2)]

    def op():
        value = rng.choice([rng.standard_normal() * 4, 0.0, -0.0, np.inf, np.nan, 3e38, 1e-42])
        bf16 = bool(rng.random() < 0.5)
        return {"valid": bool(rng.random() < 0.8), "offset": int(rng.choice(offs)) & (~0 if bf16 else ~3),
                "value": int(np.float32(value).view(np.uint32)), "bf16": bf16, "accumulate": bool(rng.random() < 0.7),
                "raw": bool(rng.random() < 0.05), "sr": bool(rng.random() < 0.6)}
    cycles = [[op() for _ in range(ports)] for _ in range(n)]
    zeros = [(bool(rng.random() < 0.03), int(rng.integers(0, 8)), int(rng.integers(0, 4))) for _ in range(n)]
    model = Psum()
    for t in range(n + 1):              # in cycle t: the zeroing of t, then the writes requested in t - 1
        if t < n and zeros[t][0]:
            model.zero_banks(np.array([part]), zeros[t][1], 1 << zeros[t][2])
        for w in cycles[t - 1] if t else []:
            if not w["valid"]:
                continue
            if w["raw"]:
                cells, width = (model.cells(2), 2) if w["bf16"] else (model.cells(4), 4)
                cells[part, w["offset"] // width] = w["value"] & (0xFFFF if w["bf16"] else 0xFFFFFFFF)
                continue
            model.round_mode = PsumRound.SR if w["sr"] else PsumRound.RNE
            model.write(np.array([part]), np.array([w["offset"]]), np.array([w["value"]], np.uint32).view(np.float32),
                        out_dtype=Dtype.BFLOAT16 if w["bf16"] else Dtype.FP32, accumulate=w["accumulate"])
    dut = PsumPartition(part, ports)
    words = sorted({o // 4 for o in offs})
    got_words, got_states = [], []

    async def bench(ctx):
        for t in range(n + 1):
            for k in range(ports):
                w = cycles[t][k] if t < n else {"valid": False}
                for f, x in w.items():
                    ctx.set(dut.wr[k][f], x)
            z = zeros[t] if t < n else (False, 0, 0)
            ctx.set(dut.zero_hits, bank_mask(z[1], z[2]) if z[0] else 0)
            await ctx.tick()
        ctx.set(dut.zero_hits, 0)
        await ctx.tick()
        for w in words:
            ctx.set(dut.host_addr, w)
            await ctx.tick()
            got_words.append(ctx.get(dut.host_data))
        for i in range(16):
            ctx.set(dut.state_index, i)
            got_states.append(ctx.get(dut.state_data))

    simulate(dut, bench)
    assert got_words == [int(model.cells(4)[part, w]) for w in words]
    assert got_states == [int(x) for x in model.sr_state[part].reshape(-1)]


def test_cells_index_is_numpys_fancy_index():
    """psum._cells_index names the cells numpy's fancy index cells[partitions, idx] names, for
    columns of partitions against rows of cells: consecutive (two slices, as its docstring says),
    at either edge, reversed, with a gap, one wide, 1-D pairs; never outside `cells`."""
    from tensore.model.psum import _cells_index
    cells = np.arange(6 * 10).reshape(6, 10)
    cases = [(range(0, 6), range(0, 10)), (range(2, 5), range(7, 10)), (range(5, 6), range(9, 10)),
             ([3, 2, 1], range(0, 4)), ([1, 2, 4], range(2, 5)), (range(1, 4), [5, 4, 3]), (range(1, 4), [2, 3, 5]),
             (range(0, 1), range(0, 1)), (range(4, 6), range(0, 3))]
    for parts, idx in cases:
        p, i = np.array(parts)[:, None], np.array(idx)[None, :]
        at = _cells_index(cells, p, i)
        assert (cells[at] == cells[p, i]).all(), (parts, idx)
        rect = list(parts) == list(range(parts[0], parts[0] + len(parts))) and list(idx) == list(range(idx[0], idx[0] + len(idx)))
        assert all(isinstance(a, slice) for a in at) == rect, (parts, idx)
    flat = np.array([1, 2, 3]), np.array([4, 5, 6])
    assert (cells[_cells_index(cells, *flat)] == cells[flat]).all()


def test_a_zeroing_comes_before_an_older_matmuls_write_of_its_cycle():
    """D-T40 (6): in one cycle the zeroing, then the writes.  An fp16 matmul (weights 1.0, moving
    partition p: p + 1) writes PSUM bank 0 byte 4 of partitions 0, 1, 2 in cycles 11, 12, 13; a later
    MULTI_START matmul zeroes bank 0 in cycle 13: partitions 0 and 1 lose their 6.0, partition 2
    keeps it (its write follows the zeroing in that cycle)."""
    eng = Engine("mariana", rows=8, cols=8)
    for p in range(3):
        eng.sbuf.write(p, 0x0, np.full(3, 1.0, np.float16).view(np.uint16))
        eng.sbuf.write(p, 0x200, np.array([p + 1], np.float16).view(np.uint16))
    text = (f"ldweights in_dtype=fp16 rows=3 cols=3 src={_t3('sbuf(0,0x0)', 3)}\n"
            f"matmul in_dtype=fp16 out_dtype=fp32 rows=3 cols=3 acc=single src={_t3('sbuf(0,0x200)', 1)} "
            f"dst={_t3('psum(0,0,4)', 1)}\n"
            f"ldweights in_dtype=fp16 rows=1 cols=3 flags=(load_order=first_col_first) src={_t3('sbuf(0,0x0)', 3)}\n"
            f"matmul in_dtype=fp8_exp5 out_dtype=fp32 rows=1 cols=3 acc=multi_start src={_t3('sbuf(0,0x400)', 1)} "
            f"dst={_t3('psum(0,0,0)', 1)}\n")
    trace = eng.run(assemble(text, "mariana"))
    writes = [(e.cycle, e.data["partition"]) for e in trace.of_kind("psum_write") if e.op == 1]
    zero = [e.cycle for e in trace.of_kind("psum_zero") if e.op == 3]
    assert writes == [(11, 0), (12, 1), (13, 2)] and zero == [13]
    order = [(e.kind, e.op) for e in trace.events if e.cycle == 13 and e.kind.startswith("psum")]
    assert order[:2] == [("psum_zero", 3), ("psum_write", 1)]
    assert eng.psum.cells(4)[:3, 1].view(np.float32).tolist() == [0.0, 0.0, 6.0]


def test_a_younger_bf16_write_into_an_older_fp32_cell_keeps_cycle_order():
    """older_writes_later_mixed: the younger matmul's bf16 writes (byte 2 of each cell) come two cycles
    before the older's fp32 writes of the whole cells, which accumulate onto them: the golden PSUM is
    the trace's writes in cycle order, each cell the older's last write (its upper half-word read by
    the older, not written after it)."""
    eng, trace, _ = older_writes_later_mixed().golden(shared=False)
    writes = [(e.cycle, e.op, e.data["partition"], e.data["offset"], e.data["bits"]) for e in trace.of_kind("psum_write")]
    younger = [w for w in writes if w[1] == 3]
    older = [w for w in writes if w[1] == 2]
    assert [w[3] for w in younger] == [2, 2] and [w[3] for w in older] == [0, 0]
    assert all(y[0] + 2 == o[0] for y, o in zip(younger, older))
    assert np.array_equal(trace.replay_psum().cells(4)[:2, :1], eng.psum.cells(4)[:2, :1])
    assert eng.psum.cells(4)[:2, 0].tolist() == [o[4] for o in older]
    assert all(o[4] >> 16 != y[4] for y, o in zip(younger, older))     # the older's sum moved the half-word


def test_a_zeroing_comes_before_the_top_taps_writes_of_its_cycle():
    """As the test above with the older matmul on row 0 alone (its sums leave at the top tap, tap 0):
    3 vectors 1..3 on weights 1.0 into bank 0 byte 4 on, cell (c, v) written in cycle 9 + c + v, the
    last in cycle 13; the younger MULTI_START matmul zeroes bank 0 of partitions 0..2 in cycle 13, so
    exactly the cell with c + v = 4 keeps its value v + 1."""
    eng = Engine("mariana", rows=8, cols=8)
    eng.sbuf.write(0, 0x0, np.full(3, 1.0, np.float16).view(np.uint16))
    eng.sbuf.write(0, 0x200, (np.arange(3) + 1).astype(np.float16).view(np.uint16))
    text = (f"ldweights in_dtype=fp16 rows=1 cols=3 src={_t3('sbuf(0,0x0)', 3)}\n"
            f"matmul in_dtype=fp16 out_dtype=fp32 rows=1 cols=3 acc=single src={_t3('sbuf(0,0x200)', 3)} "
            f"dst={_t3('psum(0,0,4)', 3)}\n"
            f"ldweights in_dtype=fp16 rows=1 cols=3 flags=(load_order=first_col_first) src={_t3('sbuf(0,0x0)', 3)}\n"
            f"matmul in_dtype=fp8_exp5 out_dtype=fp32 rows=1 cols=3 acc=multi_start src={_t3('sbuf(0,0x400)', 1)} "
            f"dst={_t3('psum(0,0,0)', 1)}\n")
    trace = eng.run(assemble(text, "mariana"))
    assert {(e.data["partition"], (e.data["offset"] - 4) // 4): e.cycle for e in trace.of_kind("psum_write")
            if e.op == 1} == {(c, v): 9 + c + v for c in range(3) for v in range(3)}
    assert [(e.cycle, e.data["partitions"]) for e in trace.of_kind("psum_zero") if e.op == 3] == [(13, (0, 2))]
    want = [[v + 1.0 if c + v >= 4 else 0.0 for v in range(3)] for c in range(3)]
    assert eng.psum.cells(4)[:3, 1:4].view(np.float32).tolist() == want


def test_an_older_matmuls_zeroing_erases_a_younger_write_before_it():
    """older_zeroes_later: the younger matmul writes partition 0 (outside the older's zeroing) and
    partition 1 (inside) two and one cycles before the older zeroes bank 0 of partitions 1..2: in cycle
    order partition 0 keeps the younger's value, partition 1's is erased; the golden PSUM is the
    trace's actions in cycle order."""
    eng, trace, _ = older_zeroes_later().golden(shared=False)
    zero = [(e.cycle, e.data["partitions"]) for e in trace.of_kind("psum_zero")]
    younger = [(e.cycle, e.data["partition"], e.data["bits"]) for e in trace.of_kind("psum_write") if e.op == 3]
    assert len(zero) == 1 and zero[0][1] == (1, 2)
    assert [(c - zero[0][0], p) for c, p, _ in younger] == [(-2, 0), (-1, 1)]
    cells = eng.psum.cells(4)
    assert int(cells[0, 2]) == younger[0][2] != 0 and int(cells[1, 2]) == 0
    assert np.array_equal(trace.replay_psum().cells(4)[:3, :3], cells[:3, :3])


@pytest.mark.parametrize("geometry", [(0, 1, 2, 4, ("multi_mid", "single")), (1, 0, 4, 2, ("single", "multi_mid"))],
                         ids=["younger-above-zeroes", "older-above-zeroes"])
def test_matmuls_sharing_one_partition_keep_cycle_order(geometry):
    """shared_partition: the PSUM boxes of the two matmuls meet in one partition only (their edge),
    where the younger writes the shared cell before the older, and one of them zeroes bank 0 of its
    partitions: the golden PSUM is the trace's actions replayed in cycle order, and the shared cell
    holds the last write of it."""
    eng, trace, _ = shared_partition(*geometry).golden(shared=False)
    shared = max(geometry[:2])
    writes = sorted((e.cycle, e.op, e.data["bits"]) for e in trace.of_kind("psum_write")
                    if e.data["partition"] == shared and e.data["offset"] == 0)
    assert [op for _, op, _ in writes] == [3, 2]                          # the younger (op 3) first
    assert int(eng.psum.cells(4)[shared, 0]) == writes[-1][2]
    assert np.array_equal(trace.replay_psum().cells(4)[:8, :2], eng.psum.cells(4)[:8, :2])


ONES_LOAD = f"ldweights in_dtype=fp16 rows=8 cols=8 src={_t3('sbuf(0,0x0)', 8)}\n"


def _ones_engine(vectors: int, **kw) -> Engine:
    """MARIANA 8 x 8 with fp16 1.0 weights at SBUF 0x0 (ONES_LOAD) and `vectors` fp16 1.0 moving
    elements at 0x200, partitions 0..7."""
    eng = Engine("mariana", rows=8, cols=8, **kw)
    for p in range(8):
        eng.sbuf.write(p, 0x0, np.full(8, 1.0, np.float16).view(np.uint16))
        eng.sbuf.write(p, 0x200, np.full(vectors, 1.0, np.float16).view(np.uint16))
    return eng


def _ones_matmul(dst: str, n: int, cols: int = 8) -> str:
    """An overwriting fp16 matmul of n vectors from SBUF 0x200 into `dst`, fp32 out."""
    return (f"matmul in_dtype=fp16 out_dtype=fp32 rows=8 cols={cols} acc=single src={_t3('sbuf(0,0x200)', n)} "
            f"dst={_t3(dst, n)}\n")


def test_a_destination_across_two_banks_zeroes_its_first_bank():
    """An overwriting matmul (zero_banks 1) whose four fp32 results run from byte 2040 of bank 2 into
    bank 3 zeroes bank 2, the bank of its first element, not bank 3: bank 2's older 8.0 at byte 0 is
    gone, bank 3's at byte 16 stays; its own four 8.0 (weights and moving data 1.0, 8 rows) stand."""
    eng = _ones_engine(4)
    text = ONES_LOAD + _ones_matmul("psum(0,2,0)", 1) + _ones_matmul("psum(0,3,16)", 1) + _ones_matmul("psum(0,2,2040)", 4)
    trace = eng.run(assemble(text, "mariana"))
    assert [(e.op, e.data["bank"], e.data["banks"]) for e in trace.of_kind("psum_zero")] == [(1, 2, 1), (2, 3, 1), (3, 2, 1)]
    cells = eng.psum.cells(4).view(np.float32)[:8]
    bank = addrmap.PSUM_BANK_BYTES // 4
    assert (cells[:, 2 * bank] == 0).all() and (cells[:, 3 * bank + 4] == 8.0).all()
    assert (cells[:, 2 * bank + 510:2 * bank + 514] == 8.0).all()


def test_a_zeroing_between_an_older_matmuls_writes_keeps_the_later_ones():
    """`contract` profile, weights and moving data 1.0 (8 x 8): a 16-vector overwriting matmul into
    bank 0 writes cell (c, v) in cycle 15 + c + v; a one-column matmul into bank 1 comes and goes; a
    one-vector overwriting matmul into bank 0 (byte 256) zeroes bank 0 in cycle 33, between the first's
    writes: exactly the first's cells of c + v >= 18 (written from cycle 33 on) keep their 8.0."""
    eng = _ones_engine(16, timing="contract")
    text = ONES_LOAD + _ones_matmul("psum(0,0,0)", 16) + _ones_matmul("psum(0,1,0)", 1, cols=1) \
        + _ones_matmul("psum(0,0,256)", 1)
    trace = eng.run(assemble(text, "mariana"))
    first = {(e.data["partition"], e.data["offset"] // 4): e.cycle for e in trace.of_kind("psum_write") if e.op == 1}
    assert first == {(c, v): 15 + c + v for c in range(8) for v in range(16)}
    assert [(e.op, e.cycle) for e in trace.of_kind("psum_zero") if e.data["bank"] == 0] == [(1, 15), (3, 33)]
    want = np.where(np.add.outer(np.arange(8), np.arange(16)) >= 18, 8.0, 0.0)
    assert np.array_equal(eng.psum.cells(4)[:8, :16].view(np.float32), want)
