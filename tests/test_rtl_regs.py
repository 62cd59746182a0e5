"""The generated RTL register block behaves as model.regs.RegisterFile on random bus and hardware
traffic (rw, rw1c, pulse, hardware-written status and counters)."""
import numpy as np
from amaranth.sim import Simulator

from tensore.model.arr_seq_regs import REGISTERS
from tensore.model.regs import RegisterFile
from tensore.rtl.regs import RegisterBlock, port_name

SEED = 20261130


def test_register_block_matches_model():
    rng = np.random.default_rng(SEED)
    names = ["arr_cluster_cfg", "queue_cfg", "perf_cntr_cfg", "err_status", "err_count", "status", "done_count",
             "matmul_done_count", "weight_load[3].instr_cnt_lsb", "matmul[48].instr_cnt_msb",
             "pe_regwrite[0].instr_cnt_lsb"]
    regs = {n: REGISTERS[n] for n in names}
    hw_fields = [(n, f, spec) for n in names for f, spec in regs[n]["fields"].items() if spec["hw"] in ("w", "rw")]
    dut = RegisterBlock(regs)
    model = RegisterFile()
    cycles = 300
    plan = []
    for _ in range(cycles):
        step = {"read": str(rng.choice(names))}
        if rng.random() < 0.5:
            step["write"] = (str(rng.choice(names)), int(rng.integers(0, 2 ** 32)))
        hw = {}
        for n, f, spec in hw_fields:
            if rng.random() < 0.1:
                hw[(n, f)] = int(rng.integers(0, 1 << spec["width"]))
        step["hw"] = hw
        plan.append(step)
    mismatches = []

    async def bench(ctx):
        for t, step in enumerate(plan):
            ctx.set(dut.addr, REGISTERS[step["read"]]["offset"])
            got = ctx.get(dut.rdata)
            want = model.read(REGISTERS[step["read"]]["offset"])
            if got != want:
                mismatches.append((t, step["read"], hex(got), hex(want)))
            pulses = {}
            if "write" in step:
                name, data = step["write"]
                ctx.set(dut.addr, REGISTERS[name]["offset"])
                ctx.set(dut.wdata, data)
                ctx.set(dut.we, 1)
                for f, spec in REGISTERS[name]["fields"].items():
                    if spec["access"] == "pulse":
                        pulses[f] = ctx.get(getattr(dut, f"{port_name(name)}__{f}__pulse"))
                fired = model.write(REGISTERS[name]["offset"], data)
                for f, v in pulses.items():
                    if v != fired.get(f, 0):
                        mismatches.append((t, name, f, "pulse", v))
            else:
                ctx.set(dut.we, 0)
            for n, f, spec in hw_fields:
                base = f"hw__{port_name(n)}__{f}"
                if (n, f) in step["hw"]:
                    ctx.set(getattr(dut, f"{base}__we"), 1)
                    ctx.set(getattr(dut, f"{base}__d"), step["hw"][(n, f)])
                    model.set(n, f, step["hw"][(n, f)])
                else:
                    ctx.set(getattr(dut, f"{base}__we"), 0)
            await ctx.tick()
        # hardware sees the fields it reads
        for n in names:
            for f, spec in REGISTERS[n]["fields"].items():
                if spec["hw"] in ("r", "rw") and spec["access"] != "pulse":
                    if ctx.get(getattr(dut, f"{port_name(n)}__{f}")) != model.get(n, f):
                        mismatches.append(("hw view", n, f))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert not mismatches, mismatches[:5]


def test_full_register_block_elaborates():
    from amaranth.hdl import Fragment
    block = RegisterBlock()
    Fragment.get(block, None)
    assert len(REGISTERS) == 8 + 3 * 98
