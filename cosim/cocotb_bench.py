"""The cocotb test that runs inside the simulator (Verilator or Icarus) on the exported engine.

cosim/hdl.py starts it with TENSORE_JOB naming a pickle of {"locksteps": [Lockstep, ...], "result": path};
for each lockstep it resets the design, runs cosim.lockstep.bench against it through `CocotbPort`,
and writes the outcomes (mismatch, cycles, checks, seconds) as a JSON list to the result path."""
import json
import os
import pickle
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly

from tensore.cosim.lockstep import bench


class CocotbPort:
    """The port adapter for cocotb: inputs change on the falling clock edge, outputs are read in
    the read-only phase after them, so every value seen is the settled value before the next
    rising edge — what Amaranth's testbench sees."""

    def __init__(self, dut):
        self.dut, self.handles = dut, {}

    def _h(self, name):
        h = self.handles.get(name)
        if h is None:
            h = self.handles[name] = getattr(self.dut, name)
        return h

    def set(self, name, value):
        self._h(name).value = value

    def get(self, name):
        v = self._h(name).value
        try:
            return v.to_unsigned() if hasattr(v, "to_unsigned") else int(v)
        except ValueError:
            raise ValueError(f"engine output {name} has unknown (X/Z) bits: {v}") from None

    async def settle(self):
        await ReadOnly()

    async def tick(self):
        await FallingEdge(self.dut.clk)


@cocotb.test()
async def lockstep(dut):
    with open(os.environ["TENSORE_JOB"], "rb") as f:
        job = pickle.load(f)
    Clock(dut.clk, 10, unit="ns").start()
    port = CocotbPort(dut)
    results = []
    for lk in job["locksteps"]:
        for name in ("desc_valid", "bus_we", "bus_addr", "bus_wdata", "event_set", "host_part", "host_word",
                     "host_we", "host_wdata", "st_resp_data", "sc_resp_data", "mv_resp_data", "desc_data"):
            port.set(name, 0)
        dut.rst.value = 1
        for _ in range(2):                   # reset: SR states load, PSUM contents become invalid
            await port.tick()
        dut.rst.value = 0
        await port.tick()
        t0 = time.perf_counter()
        print(f"[tensore] {lk.program.name}: {lk.end} cycles to run", flush=True)      # progress, in sim.log
        bad = await bench(lk, port)
        print(f"[tensore] {lk.program.name}: {'mismatch' if bad else 'ok'} after "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        results.append({"mismatch": bad.to_json() if bad else None, "cycles": lk.end, "checks": lk.checks,
                        "seconds": time.perf_counter() - t0})
    with open(job["result"], "w") as f:
        json.dump(results, f)
