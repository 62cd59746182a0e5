"""End-to-end lockstep: the engine RTL (rtl/top.py) in Amaranth's simulator beside the golden engine.

The testbench streams the program's descriptors (valid / ready), serves both SBUF ports from the
program's numpy SBUF with the engine's latency, and in every cycle compares the PSUM writes of every
partition (partition, byte offset, stored bits) and the error status with the golden trace's events
of the same cycle; at the end it reads the counters and status registers over the register bus and
compares them with the model's register file.  The first difference is reported (cycle, partition or
register, expected / actual bits and value) with a VCD of the run up to it."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cosim.array_lockstep import simulate
from model.engine import Engine as GoldenEngine
from model.isa.asm import assemble
from rtl.top import Engine

CHECK_REGS = ("err_status", "err_count", "done_count", "matmul_done_count")


@dataclass
class Mismatch:
    cycle: int
    where: str
    expected: object
    actual: object
    vcd: str | None = None

    def __str__(self):
        text = f"first mismatch at cycle {self.cycle}, {self.where}: expected {_show(self.expected)}, got {_show(self.actual)}"
        return text + (f"; waveform: {self.vcd}" if self.vcd else "")


def _show(x):
    if isinstance(x, (set, frozenset)):
        return "{" + ", ".join(f"(offset {o:#x}, {b:#010x} = {_value(b, n)})" for o, b, n in sorted(x)) + "}"
    if isinstance(x, int):
        return f"{x:#010x}"
    return str(x)


def _value(bits, nbytes):
    if nbytes == 2:
        return repr(np.array([bits << 16], np.uint32).view(np.float32)[0])
    return repr(np.array([bits], np.uint32).view(np.float32)[0])


class SbufServer:
    """Both SBUF ports of the engine, served from a [partitions, bytes] numpy array."""

    def __init__(self, sbuf: np.ndarray):
        self.mem = sbuf

    def read(self, part, off, esize) -> int:
        return int.from_bytes(self.mem[part, off:off + esize].tobytes(), "little")

    def gather(self, part, off, esize, steps, nums, count):
        i = np.indices(nums[::-1]).reshape(3, -1)[::-1]          # element order: dim 0 fastest
        offs = off + esize * (i[0] * steps[0] + i[1] * steps[1] + i[2] * steps[2])
        return [self.read(part, int(o), esize) for o in offs[:count]]


def golden(program, *, sbuf_latency=2):
    eng = GoldenEngine(program.gen, rows=program.rows, cols=program.cols, sbuf=program.sbuf_model(),
                       sbuf_latency=sbuf_latency)
    for name, value in program.regs.items():
        eng.write_reg(name, value)
    code = assemble(program.text, program.gen)
    return eng, eng.run(code), code


def run(program, *, sbuf_latency=2, pack=None, psum_partitions=16, vcd=None, stop_at=None, stats=None, tamper=None):
    """Simulate `program` (cosim.programs.Program); None when everything matches, else a Mismatch.
    `tamper(trace)` may alter the golden trace first (fault injection: how a mismatch is reported)."""
    eng, trace, code = golden(program, sbuf_latency=sbuf_latency)
    if tamper is not None:
        tamper(trace)
    if trace.stalled:
        raise ValueError(f"the golden run stalls ({trace.stalled}); lockstep needs a program that finishes")
    dut = Engine(program.gen, program.rows, program.cols, pack=pack, sbuf_latency=sbuf_latency,
                 psum_partitions=psum_partitions)
    R, Lm = program.rows, sbuf_latency - 1
    server = SbufServer(program.sbuf)
    descs = [code[i:i + 64] for i in range(0, len(code), 64)]
    writes: dict[int, set] = {}
    for e in trace.events:
        if e.kind == "psum_write":
            writes.setdefault(e.cycle, set()).add((e.data["partition"], e.data["offset"], e.data["bits"], e.data["bytes"]))
    refuse_at = min((e.cycle for e in trace.events if e.kind == "refuse"), default=None)
    for p in {w[0] for ws in writes.values() for w in ws}:
        if p >= psum_partitions:
            raise ValueError(f"the program writes PSUM partition {p}; build the engine with more partitions")
    end = trace.cycles + 4 if stop_at is None else stop_at + 1
    result: list = []
    regs = [(name, eng.regs.offset_of(name)) for name in CHECK_REGS]
    from model.arr_seq_regs import REGISTERS
    counters = [r["offset"] for n, r in REGISTERS.items() if ".instr_cnt_" in n]

    async def bench(ctx):
        for name, value in program.regs.items():            # register setup, before cycle 0
            ctx.set(dut.bus_addr, eng.regs.offset_of(name))
            ctx.set(dut.bus_wdata, value)
            ctx.set(dut.bus_we, 1)
            await ctx.tick()
        ctx.set(dut.bus_we, 0)
        base = ctx.get(dut.now)
        pending: dict[int, dict] = {}
        nxt = 0
        for cycle in range(end):
            ctx.set(dut.desc_valid, int(nxt < len(descs)))
            if nxt < len(descs):
                ctx.set(dut.desc_data, int.from_bytes(descs[nxt], "little"))
            resp = pending.pop(cycle, {})
            if "st" in resp:
                for i, x in enumerate(resp["st"]):
                    ctx.set(dut.st_resp_data[i], x)
            for r, x in resp.get("mv", {}).items():
                ctx.set(dut.mv_resp_data[r], x)
            # requests of this cycle -> responses Lm cycles later
            if ctx.get(dut.st_req_valid):
                steps = [ctx.get(dut.st_req_step[d]) for d in range(3)]
                nums = [ctx.get(dut.st_req_num[d]) for d in range(3)]
                vals = server.gather(ctx.get(dut.st_req_part), ctx.get(dut.st_req_off), ctx.get(dut.st_req_esize),
                                     steps, nums, ctx.get(dut.st_req_count))
                pending.setdefault(cycle + Lm, {})["st"] = vals
            mv = ctx.get(dut.mv_req_valid)
            for r in range(R):
                if mv >> r & 1:
                    part, es = ctx.get(dut.mv_req_part[r]), ctx.get(dut.mv_req_esize[r])
                    x = server.read(part, ctx.get(dut.mv_req_off0[r]), es) | \
                        server.read(part, ctx.get(dut.mv_req_off1[r]), es) << 32
                    pending.setdefault(cycle + Lm, {}).setdefault("mv", {})[r] = x
            # compare this cycle
            got = set()
            mon = ctx.get(dut.mon_valid)
            for p in range(psum_partitions):
                if mon >> p & 1:
                    got.add((p, ctx.get(dut.mon_offset[p]), ctx.get(dut.mon_bits[p])))
            want = {(p, o, b) for p, o, b, _ in writes.get(cycle, set())}
            wbytes = {(p, o): n for p, o, _, n in writes.get(cycle, set())}
            got = {(p, o, b & (0xFFFF if wbytes.get((p, o)) == 2 else 0xFFFFFFFF)) for p, o, b in got}
            if got != want:
                parts = sorted({x[0] for x in got ^ want})
                p = parts[0]
                result.append(Mismatch(cycle, f"PSUM partition {p} write",
                                       {(o, b, wbytes.get((p, o), 4)) for q, o, b in want if q == p},
                                       {(o, b, wbytes.get((p, o), 4)) for q, o, b in got if q == p}))
                return
            err_want = int(refuse_at is not None and cycle > refuse_at)
            if ctx.get(dut.error) != err_want:
                result.append(Mismatch(cycle, "err_status.err", err_want, ctx.get(dut.error)))
                return
            if ctx.get(dut.unsupported):
                result.append(Mismatch(cycle, "unsupported (a micro-op this RTL does not execute)", 0, 1))
                return
            *_, accepted = await ctx.tick().sample(dut.desc_ready)
            if nxt < len(descs) and accepted:
                nxt += 1
        ctx.set(dut.desc_valid, 0)
        if stop_at is not None:
            return
        for name, off in regs + [(f"counter@{o:#x}", o) for o in counters]:
            ctx.set(dut.bus_addr, off)
            await ctx.delay(1e-9)
            want = eng.read_reg(off)
            if ctx.get(dut.bus_rdata) != want:
                result.append(Mismatch(end, f"register {name}", want, ctx.get(dut.bus_rdata)))
                return
        if stats is not None:
            stats["cycles"] = end
            stats["base"] = base

    seconds = simulate(dut, bench, vcd)
    if stats is not None:
        stats["seconds"] = seconds
    return result[0] if result else None


def check(program, *, vcd_dir="build/lockstep", **kw):
    """Run; on a mismatch re-run with a VCD up to it and return the report (None if all match)."""
    bad = run(program, **kw)
    if bad is None:
        return None
    path = str(Path(vcd_dir) / f"{program.name}_{program.gen.name.lower()}.vcd")
    run(program, vcd=path, stop_at=bad.cycle + 2, **kw)
    bad.vcd = path
    return bad
