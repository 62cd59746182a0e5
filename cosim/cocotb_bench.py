"""The cocotb test that runs inside the simulator (Verilator or Icarus) on the exported engine.

cosim/hdl.py starts it with TENSORE_JOB naming a pickle of {"locksteps": [Lockstep, ...], "result": path};
for each lockstep it resets the design, runs cosim.lockstep.bench against it through `CocotbPort`,
and writes the outcomes (mismatch, cycles, checks, seconds) as a JSON list to the result path.
`CocotbPort` and `reset` are the pieces a cocotb test of one's own uses (docs/cocotb.md)."""
import json
import os
import pickle
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly

from tensore.cosim.lockstep import bench

# the engine's inputs, all 0 while it resets and between runs (docs/engine_interface.md)
IDLE_INPUTS = ("desc_valid", "bus_we", "bus_addr", "bus_wdata", "event_set", "host_part", "host_word", "host_we",
               "host_wdata", "st_resp_data", "sc_resp_data", "mv_resp_data", "desc_data")


# idle cycles after the last run, so the waveform holds the outcome of its last cycle at a rising edge
TAIL_CYCLES = 2


class CocotbPort:
    """The port adapter for cocotb: inputs change on the falling clock edge, outputs are read in
    the read-only phase after them, so every value seen is the settled value before the next
    rising edge — what Amaranth's testbench sees.  `names` maps an engine port (its Verilog name,
    rtl/blackbox.py) to the DUT's signal of another name; the others keep their names."""

    def __init__(self, dut, names: dict | None = None):
        self.dut, self.handles, self.names = dut, {}, dict(names or {})

    def _h(self, name):
        h = self.handles.get(name)
        if h is None:
            h = self.handles[name] = getattr(self.dut, self.names.get(name, name))
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
        await FallingEdge(self._h("clk"))


async def reset(dut, port: CocotbPort, cycles: int = 2):
    """Every input idle (`IDLE_INPUTS`), `rst` high for `cycles` clock cycles (the SR states load,
    PSUM contents become invalid, D-T39 (2)), then one idle cycle: cycle 0 of a run follows."""
    for name in IDLE_INPUTS:
        port.set(name, 0)
    port.set("rst", 1)
    for _ in range(cycles):
        await port.tick()
    port.set("rst", 0)
    await port.tick()


@cocotb.test()
async def lockstep(dut):
    with open(os.environ["TENSORE_JOB"], "rb") as f:
        job = pickle.load(f)
    Clock(dut.clk, 10, unit="ns").start()
    port = CocotbPort(dut)
    results = []
    for lk in job["locksteps"]:
        lk.__dict__.setdefault("progress", None)        # not pickled (Lockstep.__getstate__): no progress here
        await reset(dut, port)
        t0 = time.perf_counter()
        print(f"[tensore] {lk.program.name}: {lk.end} cycles to run", flush=True)      # progress, in sim.log
        bad = await bench(lk, port)
        print(f"[tensore] {lk.program.name}: {'mismatch' if bad else 'ok'} after "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        results.append({"mismatch": bad.to_json() if bad else None, "cycles": lk.end, "checks": lk.checks,
                        "seconds": time.perf_counter() - t0})
    # the last PSUM word's data is on host_lanes after the edge that read it: one more cycle puts it
    # before a rising edge in the waveform, where `tensore check-waves` samples it (cosim/waves.py)
    for _ in range(TAIL_CYCLES):
        await port.tick()
    with open(job["result"], "w") as f:
        json.dump(results, f)
