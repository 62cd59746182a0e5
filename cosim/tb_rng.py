"""cocotb testbench: the exported xorshift32 block against the numpy model (D-09)."""
import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from tensore.model.dtypes import xorshift32

SEEDS = [0x9E3779B9, 0x00000001, 0xDEADBEEF, 0x00000000]
STEPS = 300


@cocotb.test()
async def stream_matches_numpy(dut):
    """Load each seed, step STEPS times; state and rand follow model.dtypes.xorshift32 exactly."""
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value, dut.step.value, dut.load.value = 1, 0, 0
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    await ReadOnly()
    assert int(dut.state.value) == 0x1234ABCD, "reset value"
    for seed in SEEDS:
        await RisingEdge(dut.clk)
        dut.load.value, dut.load_value.value, dut.step.value = 1, seed, 0
        await RisingEdge(dut.clk)
        dut.load.value, dut.step.value = 0, 1
        state = np.array([seed], np.uint32)
        for cycle in range(STEPS):
            await ReadOnly()
            assert int(dut.state.value) == int(state[0]), f"seed {seed:#x} cycle {cycle}"
            state = xorshift32(state)
            assert int(dut.rand.value) == int(state[0]) & 0xFFFF, f"seed {seed:#x} cycle {cycle}"
            await RisingEdge(dut.clk)
        dut.step.value = 0
