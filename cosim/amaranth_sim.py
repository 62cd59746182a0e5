"""Amaranth's simulator as every in-process lockstep runs it (cosim/lockstep.py, cosim/array_lockstep.py,
cosim/watchdog.py)."""
from __future__ import annotations

import time
from pathlib import Path

from amaranth.sim import Simulator


def simulate(dut, bench, vcd=None) -> float:
    """Run the testbench `bench` against `dut` in Amaranth's simulator (10 ns clock), optionally
    writing a VCD; returns the seconds the run took."""
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
