"""The RTL PSUM partition against model.psum.Psum: the same writes give the same cells and states."""
import numpy as np
from amaranth.sim import Simulator

from model.dtypes import Dtype
from model.isa.enums import PsumRound
from model.psum import Psum
from rtl.psum import PsumPartition

SEED = 20261130
PART = 5


def test_psum_partition_matches_model():
    rng = np.random.default_rng(SEED)
    n = 400
    # few cells, so that back-to-back writes hit the same word (the transparent read path)
    offs = [b * 2048 + 4 * w + 2 * h for b in (0, 1, 2, 7) for w in range(3) for h in range(2)]
    ops = []
    for i in range(n):
        value = rng.choice([rng.standard_normal() * 4, 0.0, -0.0, np.inf, -np.inf, np.nan, 3e38, 1e-42])
        ops.append({"valid": rng.random() < 0.85, "offset": int(rng.choice(offs)),
                    "value": int(np.float32(value).view(np.uint32)), "bf16": bool(rng.random() < 0.5),
                    "acc": bool(rng.random() < 0.6), "raw": bool(rng.random() < 0.05), "sr": bool(rng.random() < 0.5),
                    "zero": bool(rng.random() < 0.03), "zbank": int(rng.integers(0, 8)), "zlog2": int(rng.integers(0, 4))})
    for op in ops:
        if not op["bf16"]:
            op["offset"] &= ~3                     # fp32 cells are words
    # the model, in the RTL's order: in cycle t the zero of t, then the write requested in t - 1
    model = Psum()
    for t in range(n + 1):
        if t < n and ops[t]["zero"]:
            model.zero_banks(np.array([PART]), ops[t]["zbank"], 1 << ops[t]["zlog2"])
        if t and ops[t - 1]["valid"]:
            op = ops[t - 1]
            if op["raw"]:
                if op["bf16"]:
                    model.cells(2)[PART, op["offset"] // 2] = op["value"] & 0xFFFF
                else:
                    model.cells(4)[PART, op["offset"] // 4] = op["value"]
                continue
            model.round_mode = PsumRound.SR if op["sr"] else PsumRound.RNE
            model.write(np.array([PART]), np.array([op["offset"]]),
                        np.array([op["value"]], np.uint32).view(np.float32),
                        out_dtype=Dtype.BFLOAT16 if op["bf16"] else Dtype.FP32, accumulate=op["acc"])
    dut = PsumPartition(PART)
    words = sorted({o // 4 for o in offs})
    got_words, got_states = {}, []

    async def bench(ctx):
        for t in range(n + 1):
            op = ops[t] if t < n else {"valid": False, "zero": False}
            if op["valid"]:
                ctx.set(dut.wr_valid, 1)
                ctx.set(dut.wr_offset, op["offset"])
                ctx.set(dut.wr_value, op["value"])
                ctx.set(dut.wr_bf16, op["bf16"])
                ctx.set(dut.wr_accumulate, op["acc"])
                ctx.set(dut.wr_raw, op["raw"])
                ctx.set(dut.wr_sr, op["sr"])
            else:
                ctx.set(dut.wr_valid, 0)
            ctx.set(dut.zero_valid, op["zero"])
            if op["zero"]:
                ctx.set(dut.zero_bank, op["zbank"])
                ctx.set(dut.zero_log2, op["zlog2"])
            await ctx.tick()
        ctx.set(dut.wr_valid, 0)
        ctx.set(dut.zero_valid, 0)
        await ctx.tick()
        for w in words:
            ctx.set(dut.host_addr, w)
            await ctx.tick()
            got_words[w] = ctx.get(dut.host_data)
        for i in range(16):
            ctx.set(dut.state_index, i)
            got_states.append(ctx.get(dut.state_data))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    expect = model.cells(4)[PART]
    for w in words:
        assert got_words[w] == int(expect[w]), (w, hex(got_words[w]), hex(int(expect[w])))
    assert got_states == [int(x) for x in model.sr_state[PART].reshape(-1)]
