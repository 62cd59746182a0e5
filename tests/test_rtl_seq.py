"""rtl/seq.py on its own: every descriptor of a program issues or is refused in the golden engine's
cycle (docs/timing.md, SPEC D-23, the matmul-time refusals of D-T31), and the status and counter
registers end as the model's; rtl/weight_state.py against a numpy record of the last load per PE."""
import random
from pathlib import Path

import numpy as np
import pytest
from amaranth.hdl import ClockDomain, Module
from amaranth.sim import Simulator
from tensore.cosim import random_programs as R
from tensore.cosim.lockstep import golden
from tensore.cosim.programs import library
from tensore.model.arr_seq_regs import REGISTERS
from tensore.model.dtypes import Gen
from tensore.model.isa.asm import assemble
from tensore.model.isa.enums import ErrorCode, Opcode
from tensore.model.isa.microop import Kind
from tensore.rtl.config import Config
from tensore.rtl.seq import Sequencer
from tensore.rtl.weight_state import WeightState

L = 2
REGS = ["err_status", "err_count", "done_count", "matmul_done_count", "status"] + \
    [n for n in REGISTERS if ".instr_cnt_" in n]


def _expected(program):
    """(issues {cycle: opcode}, refusals {cycle: code}, fetched PeRegWrite values {issue cycle: value},
    registers {offset: value}) of the golden run, cycles counted from the first descriptor cycle."""
    eng, trace, _ = golden(program, sbuf_latency=L)
    issues = {e.cycle: e.data["opcode"] for e in trace.of_kind("issue")}
    refusals = {e.cycle: int(e.data["code"]) for e in trace.of_kind("refuse")}
    fetched = {o.t_issue: eng._reg_value(o.desc) for o in trace.ops
               if o.uop is not None and o.uop.kind == Kind.REGWRITE}
    regs = {eng.regs.offset_of(n): eng.read_reg(n) for n in REGS}
    return issues, refusals, fetched, regs, trace.cycles + 4


async def _bench(ctx, seq, program):
    """Drive one program as cosim/lockstep.bench does: (what the sequencer did, what the model did)."""
    issues, refusals, fetched, regs, end = _expected(program)
    code = assemble(program.text, program.gen)
    descs = [int.from_bytes(code[i:i + 64], "little") for i in range(0, len(code), 64)]
    for name, value in program.regs.items():
        ctx.set(seq.bus.addr, REGISTERS[name]["offset"])
        ctx.set(seq.bus.wdata, value)
        ctx.set(seq.bus.we, 1)
        await ctx.tick()
    ctx.set(seq.bus.we, 0)
    got_issue, got_refuse, nxt, apply = {}, {}, 0, {}
    for cycle in range(end):
        ctx.set(seq.desc.valid, int(nxt < len(descs)))
        if nxt < len(descs):
            ctx.set(seq.desc.data, descs[nxt])
        reg = apply.pop(cycle, None)
        ctx.set(seq.reg.apply, int(reg is not None))
        if reg is not None:
            ctx.set(seq.reg.index, reg[0])
            ctx.set(seq.reg.value, reg[1])
        if ctx.get(seq.issue.valid):
            got_issue[cycle] = ctx.get(seq.issue.uop.op)
            if got_issue[cycle] == Opcode.PE_REG_WRITE and not ctx.get(seq.issue.bypass):
                apply[cycle + L] = (ctx.get(seq.issue.uop.reg), fetched[cycle])   # the load unit's fetch, L later
        if ctx.get(seq.refuse):
            got_refuse[cycle] = ctx.get(seq.refuse_code)
        accepted = ctx.get(seq.desc.ready)
        await ctx.tick()
        nxt += int(nxt < len(descs) and accepted)
    ctx.set(seq.desc.valid, 0)
    got_regs = {}
    for off in regs:
        ctx.set(seq.bus.addr, off)
        got_regs[off] = ctx.get(seq.bus.rdata)
    return (got_issue, got_refuse, got_regs), (issues, refusals, regs)


def _run(programs):
    """The programs (one generation and array size) on a sequencer of each one's timing profile,
    reset before each."""
    out = []
    for timing in dict.fromkeys(p.timing for p in programs):
        out += _run_one([p for p in programs if p.timing == timing])
    return out


def _run_one(programs):
    p0 = programs[0]
    seq = Sequencer(Config(p0.gen.name, p0.rows, p0.cols, sbuf_latency=L, timing=p0.timing))
    top = Module()
    top.domains.sync = sync = ClockDomain()
    top.submodules.seq = seq
    out = []

    async def testbench(ctx):
        for p in programs:
            ctx.set(sync.rst, 1)
            for _ in range(2):
                await ctx.posedge(sync.clk)
            ctx.set(sync.rst, 0)
            out.append((p.name, *await _bench(ctx, seq, p)))

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()
    return out


def _check(results):
    for name, got, want in results:
        for what, g, w in zip(("issue cycles", "refusals", "registers"), got, want):
            only_rtl, only_model = sorted(set(g.items()) - set(w.items())), sorted(set(w.items()) - set(g.items()))
            assert g == w, f"{name}: {what} differ: rtl only {only_rtl[:4]}, model only {only_model[:4]}"


@pytest.mark.parametrize("gen", [Gen.CAYMAN, Gen.MARIANA, Gen.MAVERICK], ids=lambda g: g.name)
def test_library_issue_cycles(gen):
    """Every third library program of the generation: issue and refusal cycles, codes, final counters."""
    progs = [p for p in library(gen) if (p.rows, p.cols) == (8, 16 if gen == Gen.MAVERICK else 8)][::3]
    assert len(progs) >= 8
    _check(_run(progs))


def test_matmul_time_refusals():
    """The reproducers of D-T31's two matmul-time refusals, and random programs: the sequencer
    refuses in the model's cycle with the model's code."""
    repro = sorted((Path(__file__).parent / "repro").glob("*_mariana.s"))
    progs = [p for p in (R.load(s.with_suffix("")) for s in repro) if (p.rows, p.cols) == (8, 4)]
    progs += [R.generate(Gen.MARIANA, seed, rows=8, cols=4, blocks=6) for seed in range(4)]
    results = _run(progs)
    _check(results)
    codes = {c for _, _, (_, refusals, _) in results for c in refusals.values()}
    assert {ErrorCode.DTYPE_MIX, ErrorCode.BAD_MX} <= codes


def test_weight_state_against_the_last_load():
    """Random loads and queries on a 8 x 12 array: `mix` and `pump` as numpy says."""
    rows, cols, rnd = 8, 12, random.Random(5)
    dut = WeightState(rows, cols)
    loaded, fp32, pack = (np.zeros((rows, cols), int) for _ in range(3))

    def block():
        r0, c0 = rnd.randrange(rows), rnd.randrange(cols)
        return r0, rnd.randrange(0, rows - r0 + 1), c0, rnd.randrange(0, cols - c0 + 1)

    def drive(ctx, port, b):
        for name, v in zip(("row0", "rows", "col0", "cols"), b):
            ctx.set(getattr(port, name), v)

    async def testbench(ctx):
        for _ in range(400):
            lb, qb = block(), block()
            lf, lp, qf, qp = rnd.getrandbits(1), rnd.choice((1, 2, 4, 8)), rnd.getrandbits(1), rnd.choice((1, 2, 4, 8))
            drive(ctx, dut.query, qb)
            ctx.set(dut.q_fp32, qf)
            ctx.set(dut.q_pack, qp)
            sl = (slice(qb[0], qb[0] + qb[1]), slice(qb[2], qb[2] + qb[3]))
            held = loaded[sl] == 1
            assert ctx.get(dut.mix) == int((held & (fp32[sl] != qf)).any())
            assert ctx.get(dut.pump) == int((held & (pack[sl] != qp)).any())
            load = rnd.random() < 0.4
            drive(ctx, dut.block, lb)
            ctx.set(dut.load, int(load))
            ctx.set(dut.fp32, lf)
            ctx.set(dut.pack, lp)
            await ctx.tick()
            if load:
                sl = (slice(lb[0], lb[0] + lb[1]), slice(lb[2], lb[2] + lb[3]))
                loaded[sl], fp32[sl], pack[sl] = 1, lf, lp

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()



def test_sequencer_module_name_per_timing_profile():
    """The timing profile is an elaboration parameter of the sequencer (D-T98: its issue rules), so
    each profile's sequencer has a module name of its own (the export writes a block once per name),
    and the default profile's build keeps the name without a profile suffix."""
    from tensore.model.timing import DEFAULT_PROFILE, PROFILES
    names = {t: Sequencer(Config("mariana", 8, 8, timing=t)).module_name for t in PROFILES}
    assert len(set(names.values())) == len(PROFILES), names
    assert names[DEFAULT_PROFILE] == "tensore_sequencer_mariana_r8_c8_l2", names
    assert all(n.endswith(f"_t{t}") for t, n in names.items() if t != DEFAULT_PROFILE), names
