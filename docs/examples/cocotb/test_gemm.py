"""A cocotb test of the exported engine, written from the project's pieces (docs/cocotb.md).

It drives the descriptor stream (valid / ready), serves the stationary and moving SBUF ports from
the program's SBUF image `sbuf_latency - 1` cycles after each request, and hands every cycle's PSUM
writes to the scoreboard: a `Lockstep`, the golden engine's run of the same program, which compares
them (and the error status) with the golden trace's, then the registers and the PSUM read back.
It runs plain weight loads and matmuls (the stationary and moving ports without MX or transposes);
`cosim.lockstep.bench` (one `await`, last lines) serves every port for every micro-op.

The program comes from the environment (run.py sets it): TENSORE_PROGRAM (.s), TENSORE_SBUF (.npz),
TENSORE_GEN, TENSORE_ROWS, TENSORE_COLS, TENSORE_PSUM_PARTITIONS; TENSORE_BENCH=1 runs `bench`."""
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly

from tensore.cosim.cocotb_bench import CocotbPort, reset
from tensore.cosim.lockstep import MV_BITS, MV_ELEMS, MV_W, ST_W, Lockstep, SbufServer, bench
from tensore.cosim.programs import Program
from tensore.inputs import load_sbuf, read_program
from tensore.model.dtypes import Gen
from tensore.rtl.mx import MAP_FIELDS


def field(packed: int, i: int, width: int, signed: bool = False) -> int:
    """Element i of a field-major port (`width` bits per element)."""
    x = packed >> (width * i) & ((1 << width) - 1)
    return x - (1 << width) if signed and x >> (width - 1) else x


def scoreboard() -> Lockstep:
    """The golden engine's run of the program: the expected writes, registers and PSUM."""
    env = os.environ
    gen = Gen.parse(env["TENSORE_GEN"])
    src = read_program(env["TENSORE_PROGRAM"], gen)
    program = Program(src.name, gen, int(env["TENSORE_ROWS"]), int(env["TENSORE_COLS"]), src.source_text(gen),
                      load_sbuf(env["TENSORE_SBUF"]))
    return Lockstep(program, psum_partitions=int(env["TENSORE_PSUM_PARTITIONS"]))


def stationary_answer(sbuf: SbufServer, port: CocotbPort) -> list:
    """The elements of this cycle's stationary request, in pattern order."""
    get = port.get
    steps = [field(get("st_req_step"), d, *ST_W["step"]) for d in range(3)]
    nums = [field(get("st_req_num"), d, *ST_W["num"]) for d in range(3)]
    emap = [field(get(f"st_req_{f}"), 0, *ST_W[f]) for f in MAP_FIELDS]
    return sbuf.gather(get("st_req_part"), get("st_req_off"), get("st_req_esize"), steps, nums, get("st_req_count"),
                       emap=emap)


def row_answers(sbuf: SbufServer, port: CocotbPort, prefix: str, rows: int) -> dict:
    """{row: its answer word} for the rows requesting this cycle (MV_ELEMS elements of `esize` bytes)
    on the moving port (`mv`) or the weight column port (`cl`, under `public`); `rows`: the array's."""
    valid = port.get(f"{prefix}_req_valid")
    part, esize = port.get(f"{prefix}_req_part"), port.get(f"{prefix}_req_esize")
    offs = [port.get(f"{prefix}_req_off{j}") for j in range(MV_ELEMS)]
    out = {}
    for r in (r for r in range(rows) if valid >> r & 1):
        p, n = field(part, r, *MV_W["part"]), field(esize, r, *MV_W["esize"])
        out[r] = sum(sbuf.read(p, field(o, r, *MV_W["off0"]), n) << (32 * j) for j, o in enumerate(offs))
    return out


def psum_writes(port: CocotbPort, lk: Lockstep) -> set:
    """This cycle's PSUM writes, every monitor (`mon`, `mon2`, ...): (partition, offset, bits, bytes)."""
    got = set()
    for mon in lk.monitors:
        valid = port.get(f"{mon}_valid")
        offset, bits, bf16 = (port.get(f"{mon}_{f}") for f in ("offset", "bits", "bf16"))
        got |= {(p, field(offset, p, 14), field(bits, p, 32), 2 if bf16 >> p & 1 else 4)
                for p in range(lk.parts) if valid >> p & 1}
    return got


@cocotb.test()
async def gemm(dut):
    lk = scoreboard()
    Clock(dut.clk, 10, unit="ns").start()
    port = CocotbPort(dut)                  # CocotbPort(dut, names={...}): a DUT whose ports are named otherwise
    await reset(dut, port)
    if os.environ.get("TENSORE_BENCH") == "1":
        bad = await bench(lk, port)         # the project's testbench: every port, every micro-op
        assert bad is None, str(bad)        # every write matched the golden run's
        dut._log.info(f"{lk.program.name}: {len(lk.descs)} descriptors, {lk.expected_writes()} PSUM writes, "
                      f"{lk.checks} checks: OK")
        return
    for addr, value in lk.setup:            # the program's register writes, before cycle 0
        port.set("bus_addr", addr)
        port.set("bus_wdata", value)
        port.set("bus_we", 1)
        await port.tick()
    port.set("bus_we", 0)
    sbuf, due, st_word, mv_word, nxt = SbufServer(lk.program.sbuf), {}, 0, 0, 0
    writes = 0
    for cycle in range(lk.end):
        # inputs of this cycle: the next descriptor, the answers due now
        port.set("desc_valid", int(nxt < len(lk.descs)))
        port.set("desc_data", lk.descs[nxt] if nxt < len(lk.descs) else 0)
        answer = due.pop(cycle, {})
        for e, x in enumerate(answer.get("st", ())):    # its elements replace the last answer's, the rest stay
            st_word = st_word & ~(0xFFFFFFFF << (32 * e)) | x << (32 * e)
        for k, x in answer.get("cl", {}).items():     # row k's weight columns: st words 4k .. 4k + 3
            st_word = st_word & ~(((1 << MV_BITS) - 1) << (MV_BITS * k)) | x << (MV_BITS * k)
        if "st" in answer or "cl" in answer:
            port.set("st_resp_data", st_word)
        if "mv" in answer:
            for r, x in answer["mv"].items():
                mv_word = mv_word & ~(((1 << MV_BITS) - 1) << (MV_BITS * r)) | x << (MV_BITS * r)
            port.set("mv_resp_data", mv_word)
        await ReadOnly()
        # requests of this cycle: answered sbuf_latency - 1 cycles later
        if port.get("st_req_valid"):
            due.setdefault(cycle + lk.L - 1, {})["st"] = stationary_answer(sbuf, port)
        if port.get("mv_req_valid"):
            due.setdefault(cycle + lk.L - 1, {})["mv"] = row_answers(sbuf, port, "mv", lk.rows)
        if lk.cl_rows and port.get("cl_req_valid"):
            due.setdefault(cycle + lk.L - 1, {})["cl"] = row_answers(sbuf, port, "cl", lk.cl_rows)
        # the scoreboard: this cycle's writes and error status against the golden run's
        got = psum_writes(port, lk)
        writes += len(got)
        bad = lk.check_cycle(cycle, got, port.get("error"), port.get("unsupported"))
        assert bad is None, str(bad)
        accepted = nxt < len(lk.descs) and port.get("desc_ready")
        done = port.get("done")
        await FallingEdge(dut.clk)
        nxt += int(accepted)
    port.set("desc_valid", 0)
    assert nxt == len(lk.descs), f"{len(lk.descs) - nxt} descriptors never accepted"
    assert lk.check_idle(done) is None, "the engine is busy after the golden run's end"
    for name, offset, want in lk.regs:      # status and counters over the register bus
        port.set("bus_addr", offset)
        await ReadOnly()
        bad = lk.check_reg(name, want, port.get("bus_rdata"))
        assert bad is None, str(bad)
        await FallingEdge(dut.clk)
    for i, word in enumerate(lk.final_words):       # the PSUM the program wrote, through the host port
        port.set("host_word", word)
        await FallingEdge(dut.clk)          # every partition's word `word`, one cycle later
        lanes = port.get("host_lanes")
        bad = lk.check_psum(i, [field(lanes, p, 32) for p in range(lk.parts)])
        assert bad is None, str(bad)
    dut._log.info(f"{lk.program.name}: {nxt} descriptors, {writes} PSUM writes, {lk.checks} checks: OK")
