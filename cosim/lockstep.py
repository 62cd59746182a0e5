"""End-to-end lockstep: the engine RTL (rtl/top.py) beside the golden engine, cycle by cycle.

`Lockstep` holds one program's golden run and is the testbench: it streams the descriptors
(valid / ready), serves both SBUF ports from the program's numpy SBUF with the engine's latency, and
in every cycle compares the PSUM writes of every partition (partition, byte offset, stored bits)
and the error status with the golden trace's events of that cycle; at the end it reads the
counters and status registers over the register bus and compares them with the model's register
file.  The first difference is a `Mismatch` (cosim/mismatch.py: cycle, partition or register,
expected / actual bits and value).  `bench(lk, port)` is written against a small port adapter, so
the same testbench runs in Amaranth's simulator (`run`, here) and on exported Verilog through cocotb
(cosim/hdl.py).
Wide ports are read and written packed (one integer per port per cycle)."""
from __future__ import annotations

import time
from functools import partial
from pathlib import Path

import numpy as np
from amaranth.hdl import Shape
from amaranth.lib import data

from tensore.cosim.amaranth_sim import simulate
from tensore.cosim.mismatch import Mismatch, first_with_waveform
from tensore.cosim.progress import silent, simulation
from tensore.model.arr_seq_regs import REGISTERS
from tensore.model.dtypes import Dtype
from tensore.model.isa.enums import Opcode
from tensore.model.trace import Event
from tensore.rtl.column_load import column_rows
from tensore.rtl.load_unit import STATIONARY_REQUEST
from tensore.rtl.mx import MAP_FIELDS, mapped
from tensore.rtl.rowport import MV_REQUEST
from tensore.rtl.top import MV_ELEMS
from tensore.rtl.psum_bank import monitor_names
from tensore.rtl.config import PSUM_PORTS, Config

MV_BITS = 32 * MV_ELEMS                 # one row of mv_resp_data
MX_FIELDS = ("addr", "elem", "stride", "count", "nib", *MAP_FIELDS, "spart", "soff")     # an MX moving request's
MV_MASK = (1 << MV_BITS) - 1
CHECK_REGS = ("err_status", "err_count", "done_count", "matmul_done_count")


class SbufServer:
    """Both SBUF ports of the engine, served from a [partitions, bytes] numpy array."""

    def __init__(self, sbuf: np.ndarray):
        self.mem = sbuf

    def read(self, part, off, esize) -> int:
        return int.from_bytes(self.mem[part, off:off + esize].tobytes(), "little")

    def nibble(self, part, addr) -> int:
        return int(self.mem[part, addr >> 1]) >> (4 * (addr & 1)) & 0xF

    def gather(self, part, off, esize, steps, nums, count, xpose=0, nib=0, emap=(1, 0, 1), first=0, xpack=1):
        """`count` elements of partition `part` along a TENSOR3D pattern of positions, position p at
        element `mapped(p, *emap)` from byte `off` (with `nib`, 4-bit elements: in nibbles from nibble
        address 2 * off), or (`xpose`) `xpack` elements of each of count / xpack partitions from `part`
        on: element e is partition part + e div xpack's at position first + e mod xpack of the pattern."""
        if xpose:
            xpack = max(xpack, 1)
            parts = [part + e // xpack for e in range(count)]
            rel = [_position(first + e % xpack, steps, nums) for e in range(count)]
        else:
            i = np.indices(nums[::-1]).reshape(3, -1)[::-1]          # element order: dim 0 fastest
            pos = (i[0] * steps[0] + i[1] * steps[1] + i[2] * steps[2])[:count]
            parts, rel = [part] * len(pos), [mapped(int(p), *emap) for p in pos]
        if nib:
            return [self.nibble(p, 2 * off + x) for p, x in zip(parts, rel)]
        return [self.read(p, off + esize * x, esize) for p, x in zip(parts, rel)]

    def mx_row(self, part, addr, elem, stride, count, nib, emap, spart, soff) -> int:
        """An MX moving request: `count` codes of indices elem + j * stride of a data pattern at `addr`
        (bytes, or nibbles), each at addr + mapped(index, *emap), in bytes 0-7, and the block scale byte
        at (spart, soff) in byte 8."""
        at = [addr + mapped(elem + j * stride, *emap) for j in range(count)]
        codes = [self.nibble(part, a) if nib else int(self.mem[part, a]) for a in at]
        return sum(c << (8 * j) for j, c in enumerate(codes)) | int(self.mem[spart, soff]) << 64


def _position(p, steps, nums) -> int:
    """The element offset of position p of a TENSOR3D pattern (dim 0 fastest)."""
    n0, n1 = max(nums[0], 1), max(nums[1], 1)
    return (p % n0) * steps[0] + (p // n0 % n1) * steps[1] + (p // (n0 * n1)) * steps[2]


def golden(program, *, sbuf_latency=2):
    """A golden run of `program` of its own (engine, trace, machine code): Program.golden, unshared."""
    return program.golden(sbuf_latency, shared=False)


def _widths(fields) -> dict:
    """{field: (width, signed)} of a request's fields (one element's, for arrays): how to cut its ports."""
    out = {}
    for name, shape in fields:
        s = shape.elem_shape if isinstance(shape, data.ArrayLayout) else shape
        s = Shape.cast(s)
        out[name] = (s.width, s.signed)
    return out


MV_W = _widths((name, f.shape) for name, f in MV_REQUEST)           # per row
ST_W = _widths(STATIONARY_REQUEST.items())                          # per element of step / num


def _field(packed: int, i: int, width: int, signed: bool = False) -> int:
    x = (packed >> (width * i)) & ((1 << width) - 1)
    return x - (1 << width) if signed and x >> (width - 1) else x


def write_rows(trace) -> np.ndarray:
    """[n, 5] int64 (cycle, partition, byte offset, bits, bytes) of every PSUM write of a golden
    trace (Trace.write_rows), each write once, sorted."""
    rows = trace.write_rows()
    return np.unique(rows, axis=0) if len(rows) else rows


def needs_sparse32(trace) -> bool:
    """Whether a golden run executes a MatmulSparse of 32-bit values (FP32 data, or a LUT table of
    FP32 entries), which the engine runs only when built with `sparse32` (D-T40 (3))."""
    table = None
    for o in trace.ops:
        if o.t_issue is None:
            continue
        if o.desc.op == Opcode.CONV_LUT_LOAD:
            table = o.uop.dtype
        elif o.desc.op == Opcode.MATMUL_SPARSE and (table if o.uop.lut else o.uop.dtype) == Dtype.FP32:
            return True
    return False


class Lockstep:
    """One program's golden run, as per-cycle stimulus and expectations for the engine RTL."""

    def __init__(self, program, *, sbuf_latency=2, pack=None, psum_partitions=16, psum_ports=None, stop_at=None,
                 tamper=None):
        """`tamper(trace)` may alter the golden trace first (fault injection: how a mismatch is reported).
        `psum_ports`: the engine's writes per partition and cycle (default: PSUM_PORTS, or as many as
        the program needs, `need_ports`)."""
        self.program, self.L, self.parts = program, sbuf_latency, psum_partitions
        self.pack = Config.of(program, pack=pack).pack       # the build's elements per PE
        # the program's shared golden run, or one of its own that `tamper` may alter
        self.eng, self.trace, code = program.golden(sbuf_latency, shared=tamper is None)
        if tamper is not None:
            tamper(self.trace)
        if self.trace.stalled:
            raise ValueError(f"the golden run stalls ({self.trace.stalled}); lockstep needs a program that finishes")
        self.descs = [int.from_bytes(code[i:i + 64], "little") for i in range(0, len(code), 64)]
        self.write_rows = write_rows(self.trace)
        self._writes = None
        rows = self.write_rows
        if len(rows) and rows[:, 1].max() >= psum_partitions:
            p = int(rows[rows[:, 1] >= psum_partitions, 1].min())
            raise ValueError(f"the program writes PSUM partition {p}; build the engine with more partitions")
        self.refuse_at = min((e.cycle for e in self.trace.log if isinstance(e, Event) and e.kind in ("refuse", "error")),
                             default=None)
        self.trace_cycles = self.trace.cycles
        self.end = self.trace.cycles + 4 if stop_at is None else stop_at + 1
        self.final = stop_at is None
        self.setup = [(self.eng.regs.offset_of(n), v) for n, v in program.regs.items()]
        regs = [(n, self.eng.regs.offset_of(n)) for n in CHECK_REGS] + \
            [(f"counter {n}", r["offset"]) for n, r in REGISTERS.items() if ".instr_cnt_" in n]
        self.regs = [(n, off, self.eng.read_reg(off)) for n, off in regs]     # (name, offset, expected)
        self.server = SbufServer(program.sbuf)
        # the PSUM write monitors: a partition's first, second, ... write of a cycle (D-T40 (6))
        self.need_ports = int(np.unique(rows[:, 0] * (1 << 8) + rows[:, 1], return_counts=True)[1].max()) \
            if len(rows) else 1
        self.psum_ports = psum_ports or max(PSUM_PORTS, self.need_ports)
        self.monitors = monitor_names(self.psum_ports)
        self.need_sparse32 = needs_sparse32(self.trace)
        # the PSUM read back at the end: every word the program writes, of every partition
        self.final_words = np.unique(rows[:, 2] // 4).tolist()
        self.final_psum = self.eng.psum.cells(4)[:psum_partitions, self.final_words].T.astype(np.int64)
        self.checks = 0
        self.compare = True          # False: drive and serve only (measures the checking's cost)
        self.progress = None         # a progress.Progress the testbench counts cycles on (D-T89)

    def __getstate__(self):
        """What a simulator process needs (cosim/hdl.py pickles it): not the golden engine and trace."""
        return {k: v for k, v in self.__dict__.items() if k not in ("eng", "trace", "progress")} | {"_writes": None, "progress": None}

    @property
    def rows(self):
        return self.program.rows

    @property
    def cl_rows(self) -> int:
        """The column-serial port's rows (`cl`, under `column_loads`; 0 without it): row k's answer
        is words MV_ELEMS k .. of the stationary answer (rtl/column_load.py `column_rows`, D-T102)."""
        return column_rows(self.rows, self.program.timing)

    @property
    def writes(self) -> dict:
        """{cycle: {(partition, offset, bits, bytes)}} of the golden writes, made on first use (the
        per-cycle checks); the whole-run checks read `write_rows`."""
        if self._writes is None:
            self._writes = {}
            for c, p, o, b, n in self.write_rows.tolist():
                self._writes.setdefault(c, set()).add((p, o, b, n))
        return self._writes

    def expected_writes(self) -> int:
        return len(self.write_rows)

    def check_cycle(self, cycle: int, got: set, error: int, unsupported: int) -> Mismatch | None:
        """Compare one cycle: the PSUM writes seen (partition, offset, bits, bytes: 2 for a bf16 half,
        else 4), the error status and the unsupported output, against the golden trace."""
        want = self.writes.get(cycle, set())
        got = {(p, o, b & (0xFFFF if n == 2 else 0xFFFFFFFF), n) for p, o, b, n in got}
        self.checks += 1 + len(want)
        if got != want:
            p = sorted({x[0] for x in got ^ want})[0]
            return Mismatch(cycle, f"PSUM partition {p} write",
                            {(o, b, n) for q, o, b, n in want if q == p}, {(o, b, n) for q, o, b, n in got if q == p})
        err_want = int(self.refuse_at is not None and cycle > self.refuse_at)
        if error != err_want:
            return Mismatch(cycle, "err_status.err", err_want, error)
        if unsupported:
            return Mismatch(cycle, "unsupported (a micro-op this RTL does not execute)", 0, 1)
        return None

    def check_reg(self, name: str, want: int, got: int) -> Mismatch | None:
        """One register read at the end of the run."""
        self.checks += 1
        return None if got == want else Mismatch(self.end, f"register {name}", want, got)

    def check_idle(self, done: int) -> Mismatch | None:
        """The engine's `done` output in the run's last cycle: the golden engine is idle by then (the
        watchdog of the RTL: a unit that stays busy without writing anything more shows here)."""
        self.checks += 1
        if done:
            return None
        return Mismatch(self.end - 1, f"done (the engine is idle: the golden run ends at cycle {self.trace_cycles})",
                        1, 0)

    def check_psum(self, i: int, lanes) -> Mismatch | None:
        """Word `final_words[i]` of every partition, read back after the run, against the golden PSUM."""
        self.checks += 1
        want = self.final_psum[i]
        bad = np.flatnonzero(np.asarray(lanes, np.int64) != want)
        if not len(bad):
            return None
        p, off = int(bad[0]), 4 * self.final_words[i]
        return Mismatch(self.end, f"final PSUM partition {p} word at offset {off:#x}", int(want[p]), int(lanes[p]),
                        fp32=True)


async def bench(lk: Lockstep, port) -> Mismatch | None:
    """The testbench.  `port` adapts a simulator: set(name, int), get(name) -> int, and the async
    settle() (inputs applied, outputs valid) and tick() (to the next cycle)."""
    R, Lm, parts = lk.rows, lk.L - 1, lk.parts
    for addr, value in lk.setup:                               # register setup, before cycle 0
        port.set("bus_addr", addr)
        port.set("bus_wdata", value)
        port.set("bus_we", 1)
        await port.tick()
    port.set("bus_we", 0)
    pending: dict[int, dict] = {}
    st_resp, mv_resp = 0, 0
    nxt = 0
    for cycle in range(lk.end):
        if lk.progress is not None:
            lk.progress.update(done=cycle)
        port.set("desc_valid", int(nxt < len(lk.descs)))
        if nxt < len(lk.descs):
            port.set("desc_data", lk.descs[nxt])
        resp = pending.pop(cycle, None)
        if resp is not None:
            if "st" in resp or "cl" in resp:
                for i, x in [*enumerate(resp.get("st", ())), *resp.get("cl", {}).items()]:
                    st_resp = st_resp & ~(0xFFFFFFFF << (32 * i)) | x << (32 * i)
                port.set("st_resp_data", st_resp)
            if "sc" in resp:
                port.set("sc_resp_data", resp["sc"])
            if "mv" in resp:
                for r, x in resp["mv"].items():
                    mv_resp = mv_resp & ~(MV_MASK << (MV_BITS * r)) | x << (MV_BITS * r)
                port.set("mv_resp_data", mv_resp)
        await port.settle()
        # requests of this cycle -> responses Lm cycles later
        if port.get("st_req_valid"):
            steps, nums = port.get("st_req_step"), port.get("st_req_num")
            emap = [_field(port.get(f"st_req_{f}"), 0, *ST_W[f]) for f in MAP_FIELDS]
            vals = lk.server.gather(port.get("st_req_part"), port.get("st_req_off"), port.get("st_req_esize"),
                                    [_field(steps, d, *ST_W["step"]) for d in range(3)],
                                    [_field(nums, d, *ST_W["num"]) for d in range(3)], port.get("st_req_count"),
                                    port.get("st_req_xpose"), port.get("st_req_nib"), emap,
                                    port.get("st_req_first"), port.get("st_req_xpack"))
            pending.setdefault(cycle + Lm, {})["st"] = vals
        if port.get("sc_req_valid"):
            p, o = port.get("sc_req_part"), port.get("sc_req_off")
            pending.setdefault(cycle + Lm, {})["sc"] = lk.server.read(p, o, port.get("sc_req_count"))
        mv = port.get("mv_req_valid")
        if mv:
            part, es = port.get("mv_req_part"), port.get("mv_req_esize")
            offs = [port.get(f"mv_req_off{j}") for j in range(MV_ELEMS)]
            mx = port.get("mv_req_mx")
            if mx:
                mxf = {n: port.get(f"mv_req_{n}") for n in MX_FIELDS}
            out = pending.setdefault(cycle + Lm, {}).setdefault("mv", {})
            for r in range(R):
                if mv >> r & 1:
                    p, e = _field(part, r, *MV_W["part"]), _field(es, r, *MV_W["esize"])
                    if mx >> r & 1:
                        f = {n: _field(x, r, *MV_W[n]) for n, x in mxf.items()}
                        out[r] = lk.server.mx_row(p, f["addr"], f["elem"], f["stride"], f["count"], f["nib"],
                                                  [f[n] for n in MAP_FIELDS], f["spart"], f["soff"])
                    else:
                        out[r] = _plain_row(lk, p, e, offs, r)
        if lk.cl_rows:
            _serve_columns(lk, port, pending.setdefault(cycle + Lm, {}))
        if not lk.compare:
            accepted = port.get("desc_ready")
            await port.tick()
            nxt += int(nxt < len(lk.descs) and accepted)
            continue
        # compare this cycle
        got = set()
        for prefix in lk.monitors:
            mon = port.get(f"{prefix}_valid")
            if mon:
                offs, bits, bf16 = (port.get(f"{prefix}_{f}") for f in ("offset", "bits", "bf16"))
                got |= {(p, _field(offs, p, 14), _field(bits, p, 32), 2 if bf16 >> p & 1 else 4)
                        for p in range(parts) if mon >> p & 1}
        bad = lk.check_cycle(cycle, got, port.get("error"), port.get("unsupported"))
        if bad is not None:
            return bad
        done = port.get("done")
        accepted = port.get("desc_ready")
        await port.tick()
        if nxt < len(lk.descs) and accepted:
            nxt += 1
    port.set("desc_valid", 0)
    if not (lk.final and lk.compare):
        return None
    return await _at_end(lk, port, done)


def _serve_columns(lk: Lockstep, port, due: dict):
    """The column-serial requests of this cycle (`cl`): row k's MV_ELEMS elements into words
    MV_ELEMS k .. of the stationary answer `due` L - 1 cycles later (rtl/column_load.py, D-T102)."""
    valid = port.get("cl_req_valid")
    if not valid:
        return
    part, es = port.get("cl_req_part"), port.get("cl_req_esize")
    offs = [port.get(f"cl_req_off{j}") for j in range(MV_ELEMS)]
    words = due.setdefault("cl", {})
    for k in range(lk.cl_rows):
        if valid >> k & 1:
            row = _plain_row(lk, _field(part, k, *MV_W["part"]), _field(es, k, *MV_W["esize"]), offs, k)
            words.update((MV_ELEMS * k + j, row >> (32 * j) & 0xFFFFFFFF) for j in range(MV_ELEMS))


def _plain_row(lk: Lockstep, part: int, esize: int, offs: list, r: int) -> int:
    """Row r's answer to a plain request (the moving port's or `cl`'s): its MV_ELEMS elements of
    partition `part` at the offsets `offs` (packed over the rows), element j in bits 32j.."""
    return sum(lk.server.read(part, _field(o, r, *MV_W["off0"]), esize) << (32 * j) for j, o in enumerate(offs))


async def _at_end(lk: Lockstep, port, done: int) -> Mismatch | None:
    """After the run (D-T78): the engine idle in its last cycle (`done`), the registers read over the
    bus, the PSUM words the program writes read back through the host port's lanes."""
    bad = lk.check_idle(done)
    if bad is not None:
        return bad
    for name, off, want in lk.regs:
        port.set("bus_addr", off)
        await port.settle()
        bad = lk.check_reg(name, want, port.get("bus_rdata"))
        if bad is not None:
            return bad
        await port.tick()
    for i, word in enumerate(lk.final_words):
        port.set("host_word", word)
        await port.tick()                       # the read port's data, one cycle later
        lanes = port.get("host_lanes")
        bad = lk.check_psum(i, [_field(lanes, p, 32) for p in range(lk.parts)])
        if bad is not None:
            return bad
    return None


class AmaranthPort:
    """The port adapter for Amaranth's simulator (testbench context)."""

    def __init__(self, dut, ctx):
        from tensore.rtl.blackbox import ports
        self.ctx = ctx
        self.ports = {name: value for name, (value, _) in ports(dut).items()}     # the Verilog port names

    def set(self, name, value):
        self.ctx.set(self.ports[name], value)

    def get(self, name):
        return self.ctx.get(self.ports[name])

    async def settle(self):
        pass

    async def tick(self):
        await self.ctx.tick()


def run(program, *, sbuf_latency=2, pack=None, psum_partitions=16, psum_ports=None, vcd=None, stop_at=None,
        stats=None, tamper=None, sparse32=None, log=silent):
    """Simulate `program` (cosim.programs.Program) in Amaranth; None when everything matches, else a Mismatch.
    `sparse32`: build the engine with 32-bit sparse fmaps (None: if the program needs them); `log`
    not silent: the cycles simulated on stderr (progress.simulation)."""
    from tensore.rtl.top import Engine
    lk = Lockstep(program, sbuf_latency=sbuf_latency, pack=pack, psum_partitions=psum_partitions,
                  psum_ports=psum_ports, stop_at=stop_at, tamper=tamper)
    dut = Engine(program.gen, program.rows, program.cols, pack=lk.pack, sbuf_latency=sbuf_latency,
                 psum_partitions=psum_partitions, psum_ports=lk.psum_ports,
                 sparse32=lk.need_sparse32 if sparse32 is None else sparse32, timing=program.timing)
    result: list = []

    async def testbench(ctx):
        result.append(await bench(lk, AmaranthPort(dut, ctx)))

    with simulation(log, f"{program.name} on Amaranth", lk.end) as lk.progress:
        seconds = simulate(dut, testbench, vcd)
        lk.progress.update(done=lk.end, seconds=seconds)       # the last line: the summary's measure
    lk.progress = None
    if stats is not None:
        stats.update(cycles=lk.end, seconds=seconds, checks=lk.checks, lockstep=lk)
    return result[0]


def fit_ports(lks, ports: int | None = None) -> int:
    """The PSUM write ports per partition to build for (D-T40 (6)): `ports` when given and enough (a
    one-line error naming the count to build otherwise), else PSUM_PORTS raised to the most writes
    the programs make to one partition in one cycle (the golden run).  Sets each lockstep's monitors."""
    need, lk = max(((lk.need_ports, lk) for lk in lks), key=lambda x: x[0])
    if ports and need > ports:
        raise ValueError(f"program {lk.program.name} writes {need} times to one PSUM partition in a cycle; the "
                         f"engine is built with {ports} write ports per partition: build it with {need}, or leave "
                         "the count out to fit the program")
    fit = ports or max(PSUM_PORTS, need)
    for x in lks:
        x.psum_ports, x.monitors = fit, monitor_names(fit)
    return fit


def one_array(programs):
    """The first of `programs`, which must all be of one generation, array size and timing profile
    (one engine)."""
    p0 = programs[0]
    if any((p.gen, p.rows, p.cols, p.timing) != (p0.gen, p0.rows, p0.cols, p0.timing) for p in programs):
        raise ValueError("programs of one generation, array size and timing profile are needed for one engine")
    return p0


_ENGINES: dict = {}            # build -> (Simulator, job): the engines run_many elaborated, most recent last
KEEP_ENGINES = 2              # each holds a compiled engine (tens of MB at 4 x 8)


def forget_engines():
    """Drop the elaborated engines run_many keeps (a test that patches the RTL's code calls it)."""
    _ENGINES.clear()


def _engine(build: tuple):
    """(simulator, job) of the engine `build` (rtl.top.Engine's arguments): elaborated and compiled once
    per process (most of a short program's run), reset before each later use.  Its testbench runs
    the locksteps in job["lks"], each after the engine's own reset, into job["results"]; job["key"]
    is its entry in _ENGINES."""
    from amaranth.hdl import ClockDomain, Module
    from amaranth.sim import Simulator

    from tensore.rtl.top import Engine
    key = repr(build)                   # (a timing profile may be a dataclass of its own)
    if key in _ENGINES:
        sim, job = _ENGINES.pop(key)
        sim.reset()
    else:
        gen, rows, cols, kw = build
        dut = Engine(gen, rows, cols, **dict(kw))
        top = Module()                  # the engine's own reset, as the exported engine's rst port
        top.domains.sync = sync = ClockDomain()
        top.submodules.engine = dut
        job: dict = {"key": key}

        async def testbench(ctx):
            port = AmaranthPort(dut, ctx)
            for lk in job["lks"]:
                ctx.set(sync.rst, 1)
                for _ in range(2):                  # (ctx.tick() raises DomainReset while rst is high)
                    await ctx.posedge(sync.clk)
                ctx.set(sync.rst, 0)
                job["results"].append(await bench(lk, port))
        sim = Simulator(top)
        sim.add_clock(1e-8)
        sim.add_testbench(testbench)
    _ENGINES[key] = sim, job
    while len(_ENGINES) > KEEP_ENGINES:
        _ENGINES.pop(next(iter(_ENGINES)))
    return sim, job


def run_many(programs, *, sbuf_latency=2, pack=None, psum_partitions=16, stats=None, sparse32=None) -> list:
    """Run programs of one generation and array size on one elaborated engine (elaboration costs more
    than a short program), resetting it before each; returns, per program, None or the first Mismatch.
    The engine has the largest elements per PE any of them needs, and 32-bit sparse fmaps if one
    needs them (`sparse32` None) or as `sparse32` says.  The engine is kept for the next call with
    the same build (_engine)."""
    p0 = one_array(programs)
    lks = [Lockstep(p, sbuf_latency=sbuf_latency, pack=pack, psum_partitions=psum_partitions) for p in programs]
    build_pack, ports = max(lk.pack for lk in lks), fit_ports(lks)
    s32 = any(lk.need_sparse32 for lk in lks) if sparse32 is None else sparse32
    build = (p0.gen, p0.rows, p0.cols, (("pack", build_pack), ("sbuf_latency", sbuf_latency),
                                        ("psum_partitions", psum_partitions), ("psum_ports", ports),
                                        ("sparse32", s32), ("timing", p0.timing)))
    sim, job = _engine(build)
    job.update(lks=lks, results=[])
    t0 = time.perf_counter()
    try:
        sim.run()
    except BaseException:
        _ENGINES.pop(job["key"], None)      # stopped part-way: not reused
        raise
    seconds = time.perf_counter() - t0
    if stats is not None:
        stats.update(cycles=sum(lk.end for lk in lks), seconds=seconds, checks=sum(lk.checks for lk in lks),
                     pack=build_pack)
    return job["results"]


def check(program, *, vcd_dir="build/lockstep", **kw):
    """Run; on a mismatch re-run with a VCD up to it and return the report (None if all match)."""
    return first_with_waveform(partial(run, program, **kw),
                               Path(vcd_dir) / f"{program.name}_{program.gen.name.lower()}.vcd")


def run_waves(program, waves_to, *, depth: int = 0, stats=None, **kw):
    """Run with a waveform written to `waves_to` whether or not the run passes (D-T66): Amaranth's
    VCD, converted to the format the file's suffix names (.fst / .vcd) and cut to `depth` levels
    (0: everything).  None when everything matches, else the Mismatch, which names the file."""
    import tempfile

    from tensore.cosim.wave_request import Trace, convert_vcd
    Trace.of(waves_to, depth)
    dest = Path(waves_to).resolve()
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        raw = Path(tmp) / "amaranth.vcd"
        bad = run(program, vcd=str(raw), stats=stats, **kw)
        convert_vcd(raw, dest, depth)
    if bad is not None:
        bad.vcd = str(dest)
    return bad
