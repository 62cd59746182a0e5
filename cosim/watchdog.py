"""The no-hang watchdog (issue #18 item 6, D-T74): a bound, computed from a program's descriptors
alone, on the cycle by which the engine is idle again, and the checks of a run against it.

    idle_bound(code, gen, rows=, cols=, regs=)  -> Bound   (program_bound(program) for a Program)
    check_trace(trace, bound)                   -> Hang | None   the golden engine's run
    check_rtl(idle_at, status, bound)           -> Hang | None   a harness's record of `done`
    await watch(port, bound, cycle)             -> Hang | None   any lockstep port adapter, after `bench`

The bound is a serial sum: every descriptor pays its decode and issue, the inter-instruction delay
and the longest its unit can stay busy (docs/timing.md: a load's rows and SBUF latency; a matmul's
vectors, times its passes, plus the array's rows and columns, which covers the swap wait of the
next load; a barrier's fetch; PeManageSeed's identity load and transpose).  Every issue rule waits
for something an earlier micro-op finishes, so the engine cannot be busier than all micro-ops one
after another.  A wait for an event that no earlier descriptor sets has no bound (only the host can
set it)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tensore.model.arr_seq_regs import REGISTERS
from tensore.model.dtypes import Gen
from tensore.model.isa import DESCRIPTOR_BYTES, ErrorCode, Opcode, check, decode, error_code
from tensore.model.isa.enums import FP32Mode
from tensore.model.isa.layouts import EVENT_NONE
from tensore.model.isa.microop import FP32_PASSES, KIND_OF, Kind

SLACK = 8                    # reset and the last completion's bookkeeping
STATUS = REGISTERS["status"]


@dataclass
class Bound:
    cycles: int | None               # None: a wait only the host can satisfy
    per_op: list                     # [(descriptor index, opcode name, cycles it may take)]
    reason: str = ""

    def __str__(self):
        return f"idle by cycle {self.cycles}" if self.cycles is not None else f"no bound: {self.reason}"


@dataclass
class Hang:
    cycle: int
    bound: int
    busy: list

    def __str__(self):
        return (f"watchdog: the engine is not idle at cycle {self.cycle} (bound {self.bound}, computed from the "
                f"program); still busy: {'; '.join(self.busy) or 'unknown'}")

    def to_json(self) -> dict:
        return {"cycle": self.cycle, "bound": self.bound, "busy": list(self.busy)}


def _src_count(fields: dict) -> int:
    """Elements of a descriptor's source pattern (an upper bound on its moving vectors)."""
    src = fields.get("src_mem_pattern", {})
    n = src.get("num_elem", 1)
    if isinstance(n, int):
        return n
    count = 1
    for x in n:
        count *= x
    return count


def _cost(d, rows: int, cols: int, latency: int) -> int:
    """The most cycles the valid descriptor `d` can keep the engine busy after the one before it.
    A matmul counts its fp32 mode's passes whether or not it transposes (a bound)."""
    kind = KIND_OF[d.op]
    if kind == Kind.LOAD:
        return rows + latency + 2
    if kind == Kind.SEED:                        # identity load, then a transpose of 16 states
        return 2 * (rows + latency) + cols + 40
    if kind != Kind.MATMUL:                      # PeRegWrite, ConvLutLoad
        return latency + 2
    passes = FP32_PASSES[d.fields.get("fp32_mode", FP32Mode.NONE)]
    return latency + passes * (_src_count(d.fields) + 2 * rows + cols + 2) + 2


def _delay(regs: dict) -> int:
    from tensore.model.regs import RegisterFile
    rf = RegisterFile()
    for name, value in (regs or {}).items():
        rf.write(rf.offset_of(name), value)
    return 1 + rf.get("arr_cluster_cfg", "inter_instr_dly_cnt") if rf.get("arr_cluster_cfg", "en_inter_instr_dly") else 0


def idle_bound(code: bytes, gen, *, rows: int, cols: int, regs: dict | None = None, sbuf_latency: int = 2) -> Bound:
    """The cycle (from the first descriptor's) by which the engine running `code` is idle."""
    gen = Gen.parse(gen)
    delay = _delay(regs)
    total, per_op, events = SLACK, [], Counter()
    for i in range(len(code) // DESCRIPTOR_BYTES):
        d = decode(code[i * DESCRIPTOR_BYTES:(i + 1) * DESCRIPTOR_BYTES], gen)
        name = d.op.name.lower() if isinstance(d.op, Opcode) else f"0x{int(d.op):02x}"
        refused = d.layout is None or error_code(check(d, array_cols=cols)) != ErrorCode.NONE
        cost = 2 + delay + (0 if refused else _cost(d, rows, cols, sbuf_latency))
        if not refused:
            wait, put = d.events.wait_event, d.events.set_event
            if wait != EVENT_NONE:
                if not events[wait]:
                    return Bound(None, per_op, f"descriptor {i} ({name}) waits for event {wait}, which no earlier "
                                 "descriptor sets")
                events[wait] -= 1
            if put != EVENT_NONE:
                events[put] += 1
        per_op.append((i, name, cost))
        total += cost
    return Bound(total, per_op)


def program_bound(program, *, sbuf_latency: int = 2, code: bytes | None = None) -> Bound:
    """idle_bound of a cosim Program (its text or machine `code`, array and register writes)."""
    from tensore.model.isa.asm import assemble
    code = assemble(program.text, program.gen) if code is None else code
    return idle_bound(code, program.gen, rows=program.rows, cols=program.cols, regs=program.regs,
                      sbuf_latency=sbuf_latency)


def _unit(op) -> str:
    """The unit an issued micro-op keeps busy (a seed-moving Matmul: the array)."""
    kind = op.uop.kind
    if kind == Kind.LOAD:
        return f"weight port: #{op.index} {op.name}"
    if kind in (Kind.REGWRITE, Kind.LUT, Kind.SEED):
        return f"barrier: #{op.index} {op.name}"
    return f"array: #{op.index} {op.name}"


def check_trace(trace, bound: Bound) -> Hang | None:
    """The golden engine's run against the bound: the units busy at the bound if it is not idle."""
    if bound.cycles is None:
        return None
    if trace.stalled:
        return Hang(trace.cycles, bound.cycles, [trace.stalled])
    if trace.cycles <= bound.cycles:
        return None
    t = bound.cycles
    busy = [_unit(o) for o in trace.ops if o.t_issue is not None and o.t_issue <= t < (o.t_complete or 0)]
    waiting = [o for o in trace.ops if (o.t_issue if o.t_issue is not None else o.t_decode) > t]
    if waiting:
        busy.append(f"instruction FIFO / sequencer: {len(waiting)} descriptor(s) from #{waiting[0].index} not issued")
    return Hang(t, bound.cycles, busy)


def _status(value: int) -> list:
    f = STATUS["fields"]
    busy = value >> f["busy"]["lsb"] & ((1 << f["busy"]["width"]) - 1)
    level = value >> f["ififo_level"]["lsb"] & ((1 << f["ififo_level"]["width"]) - 1)
    out = [f"instruction FIFO holds {level} descriptor(s)"] if level else []
    if busy:
        out.append("micro-ops in flight (status.busy)" if not level else "sequencer busy (status.busy)")
    return out


def check_rtl(idle_at: int | None, status: int, bound: Bound) -> Hang | None:
    """A harness's record: the cycle the engine's `done` output rose after the last descriptor (None:
    not by the end of the run) and the status register read then."""
    if bound.cycles is None or (idle_at is not None and idle_at <= bound.cycles):
        return None
    return Hang(bound.cycles if idle_at is None else idle_at, bound.cycles, _status(status))


async def watch(port, bound: Bound, cycle: int) -> Hang | None:
    """After `cosim.lockstep.bench` (the bench's cycle count `cycle`): clock the engine until its
    `done` output is high; past the bound, read `status` over the register bus and report it."""
    if bound.cycles is None:
        return None
    while True:
        await port.settle()
        if port.get("done"):
            return None
        if cycle >= bound.cycles:
            port.set("bus_addr", STATUS["offset"])
            await port.settle()
            return Hang(cycle, bound.cycles, _status(port.get("bus_rdata")))
        await port.tick()
        cycle += 1


def run_amaranth(program, *, sbuf_latency: int = 2, psum_partitions: int = 16, bound: Bound | None = None):
    """`program` on the engine RTL in Amaranth's simulator, in lockstep with the golden engine, then
    the watchdog: (Mismatch or None, Hang or None)."""
    from tensore.cosim.amaranth_sim import simulate
    from tensore.cosim.lockstep import AmaranthPort, Lockstep, bench
    from tensore.rtl.top import Engine
    lk = Lockstep(program, sbuf_latency=sbuf_latency, psum_partitions=psum_partitions)
    bound = bound or program_bound(program, sbuf_latency=sbuf_latency)
    dut = Engine(program.gen, program.rows, program.cols, pack=lk.pack, sbuf_latency=sbuf_latency,
                 psum_partitions=psum_partitions, timing=program.timing)
    out: list = []

    async def testbench(ctx):
        port = AmaranthPort(dut, ctx)
        bad = await bench(lk, port)
        out.append(bad)
        out.append(None if bad is not None else await watch(port, bound, lk.end + len(lk.regs)))

    simulate(dut, testbench)
    return out[0], out[1]
