"""Amaranth's simulator as every in-process lockstep runs it (cosim/lockstep.py, cosim/array_lockstep.py,
cosim/watchdog.py).

A run that writes a VCD records what the exported engine's testbenches do around a run, so that
`tensore check-waves` (cosim/waves.py) can check the waveform as it checks the other simulators':
the `sync` domain's reset high for `RESET_CYCLES` cycles then one idle cycle before the testbench
(the registers already hold their initial values, so the run is unchanged), and `TAIL_CYCLES` idle
cycles after it (the PSUM word read back last is on host_lanes after the edge that read it, and is
sampled before the next rising edge)."""
from __future__ import annotations

import time
from pathlib import Path

from amaranth.hdl import ClockDomain, Fragment
from amaranth.sim import Simulator

RESET_CYCLES = 2          # as cosim/cocotb_bench.reset and the compiled harness (cosim/harness.cpp)
TAIL_CYCLES = 2


def _traced(dut, bench):
    """(the design with an explicit `sync` domain whose reset the testbench drives, the testbench
    with the reset before and idle cycles after `bench`)."""
    frag = Fragment.get(dut, None)
    if "sync" in frag.domains:
        return dut, bench
    sync = ClockDomain("sync")
    frag.add_domains(sync)

    async def traced(ctx):
        ctx.set(sync.rst, 1)
        for _ in range(RESET_CYCLES):             # (ctx.tick() raises DomainReset while rst is high)
            await ctx.posedge(sync.clk)
        ctx.set(sync.rst, 0)
        await ctx.tick()
        await bench(ctx)
        for _ in range(TAIL_CYCLES):
            await ctx.tick()
    return frag, traced


def simulate(dut, bench, vcd=None) -> float:
    """Run the testbench `bench` against `dut` in Amaranth's simulator (10 ns clock), optionally
    writing a VCD (with the reset before the testbench and idle cycles after it); returns the
    seconds the run took."""
    if vcd:
        dut, bench = _traced(dut, bench)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    t0 = time.perf_counter()
    if vcd:
        Path(vcd).parent.mkdir(parents=True, exist_ok=True)
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
    return time.perf_counter() - t0
