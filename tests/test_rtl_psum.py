"""The RTL PSUM partition against model.psum.Psum: the same writes give the same cells and states; the
bank's seed ports carry a whole 32-bit state."""
import numpy as np
import pytest

from tensore.cosim.amaranth_sim import simulate
from tensore.model.dtypes import Dtype
from tensore.model.isa.enums import PsumRound
from tensore.model.psum import Psum
from tensore.rtl.psum import PsumPartition
from tests.fixtures import bank_mask

SEED = 20261130
PART = 5


def _random_ops(rng, n, offs):
    ops = []
    for i in range(n):
        value = rng.choice([rng.standard_normal() * 4, 0.0, -0.0, np.inf, -np.inf, np.nan, 3e38, 1e-42])
        op = {"valid": rng.random() < 0.85, "offset": int(rng.choice(offs)),
              "value": int(np.float32(value).view(np.uint32)), "bf16": bool(rng.random() < 0.5),
              "acc": bool(rng.random() < 0.6), "raw": bool(rng.random() < 0.05), "sr": bool(rng.random() < 0.5)}
        if not op["bf16"]:
            op["offset"] &= ~3                     # fp32 cells are words
        ops.append(op)
    return ops


def _set_write(ctx, wr, op):
    """A write port's fields from an op of _random_ops' form."""
    for f, key in (("offset", "offset"), ("value", "value"), ("bf16", "bf16"), ("accumulate", "acc"),
                   ("raw", "raw"), ("sr", "sr")):
        ctx.set(wr[f], op[key])


async def _host_read(ctx, dut, words) -> list:
    """The words through the host port (data one cycle after the address)."""
    out = []
    for w in words:
        ctx.set(dut.host_addr, w)
        await ctx.tick()
        out.append(ctx.get(dut.host_data))
    return out


def _model_write(model, op):
    if op["raw"]:
        if op["bf16"]:
            model.cells(2)[PART, op["offset"] // 2] = op["value"] & 0xFFFF
        else:
            model.cells(4)[PART, op["offset"] // 4] = op["value"]
        return
    model.round_mode = PsumRound.SR if op["sr"] else PsumRound.RNE
    model.write(np.array([PART]), np.array([op["offset"]]), np.array([op["value"]], np.uint32).view(np.float32),
                out_dtype=Dtype.BFLOAT16 if op["bf16"] else Dtype.FP32, accumulate=op["acc"])


@pytest.mark.parametrize("ports", [1, 2])
def test_psum_partition_matches_model(ports):
    """Random writes (one per port per cycle; with two ports, to different words, port 1 first as the
    model orders a c256 matmul's two slots) and zeroing: the same cells and SR states as model.psum."""
    rng = np.random.default_rng(SEED + ports)
    n = 400
    # few cells, so that back-to-back writes hit the same word (the transparent read path); port 2 of
    # a cycle writes the other half of the cells, often with the same SR state (bank, parity)
    offs = [b * 2048 + 4 * w + 2 * h for b in (0, 1, 2, 7) for w in range(3) for h in range(2)]
    offs2 = [b * 2048 + 4 * w + 2 * h for b in (0, 1, 2, 7) for w in range(3, 6) for h in range(2)]
    streams = [_random_ops(rng, n, offs)] + ([_random_ops(rng, n, offs2)] if ports == 2 else [])
    zeros = [{"zero": bool(rng.random() < 0.03), "zbank": int(rng.integers(0, 8)), "zlog2": int(rng.integers(0, 4))}
             for _ in range(n)]
    # the model, in the RTL's order: in cycle t the zero of t, then the writes requested in t - 1
    model = Psum()
    for t in range(n + 1):
        if t < n and zeros[t]["zero"]:
            model.zero_banks(np.array([PART]), zeros[t]["zbank"], 1 << zeros[t]["zlog2"])
        for ops in streams:
            if t and ops[t - 1]["valid"]:
                _model_write(model, ops[t - 1])
    dut = PsumPartition(PART, ports)
    words = sorted({o // 4 for o in offs + (offs2 if ports == 2 else [])})
    got_words, got_states = {}, []

    async def bench(ctx):
        for t in range(n + 1):
            for k, ops in enumerate(streams):
                op = ops[t] if t < n else {"valid": False}
                wr = dut.wr[k]
                ctx.set(wr.valid, op["valid"])
                if op["valid"]:
                    _set_write(ctx, wr, op)
            z = zeros[t] if t < n else {"zero": False}
            ctx.set(dut.zero_hits, bank_mask(z["zbank"], z["zlog2"]) if z["zero"] else 0)
            await ctx.tick()
        ctx.set(dut.zero_hits, 0)
        await ctx.tick()
        got_words.update(zip(words, await _host_read(ctx, dut, words)))
        for i in range(16):
            ctx.set(dut.state_index, i)
            got_states.append(ctx.get(dut.state_data))

    simulate(dut, bench)
    expect = model.cells(4)[PART]
    for w in words:
        assert got_words[w] == int(expect[w]), (w, hex(got_words[w]), hex(int(expect[w])))
    assert got_states == [int(x) for x in model.sr_state[PART].reshape(-1)]


# (cell, addend): the sum's exact value just off a tie, its deciding bits shifted out of the alignment
# (or of the subtraction's head); ties to even; a far smaller addend, all of it shifted out
NEAR_TIES = [(1.0, 2.0 ** -24 + 2.0 ** -26), (1.0, 2.0 ** -24), (1.0 + 2.0 ** -23, 2.0 ** -24),
             (-1.0, -(2.0 ** -24 + 2.0 ** -40)), (1.0, -(2.0 ** -25 + 2.0 ** -27)), (1.0, -(2.0 ** -25 + 2.0 ** -48)),
             (1.0, 2.0 ** -60), (1.0, -2.0 ** -60), (3.0, 2.0 ** -23 + 2.0 ** -45),
             (2.0 ** 100, -(2.0 ** 76 + 2.0 ** 54))]


def test_accumulate_rounds_with_the_bits_shifted_out():
    """fp32 accumulation rounds to nearest even on the sum's exact value (D-10), the bits the alignment
    or the cancellation shifts out deciding between a tie and above it: each NEAR_TIES pair written,
    then added, into its own word, against numpy's float32 add."""
    dut = PsumPartition(PART, 1)
    ops = [(4 * k, a, acc) for k, pair in enumerate(NEAR_TIES) for acc, a in enumerate(pair)]
    words = list(range(len(NEAR_TIES)))
    got = []

    async def bench(ctx):
        wr = dut.wr[0]
        for off, x, acc in ops:
            ctx.set(wr.valid, 1)
            _set_write(ctx, wr, {"offset": off, "value": int(np.float32(x).view(np.uint32)), "bf16": False,
                                 "acc": bool(acc), "raw": False, "sr": False})
            await ctx.tick()
        ctx.set(wr.valid, 0)
        await ctx.tick()
        got.extend(await _host_read(ctx, dut, words))

    simulate(dut, bench)
    want = [int((np.float32(c) + np.float32(a)).view(np.uint32)) for c, a in NEAR_TIES]
    assert [hex(g) for g in got] == [hex(w) for w in want]


def test_host_port_writes_words():
    """The host writes words (valid in both halves), the engine accumulates onto them, the host reads
    them back: the same as model.psum with the raw writes."""
    rng = np.random.default_rng(SEED + 7)
    words = [3, 512 + 9, 7 * 512 + 100]
    init = rng.integers(0, 2 ** 31, len(words), dtype=np.uint64).astype(np.uint32)
    init[0] = np.float32(1.5).view(np.uint32)
    adds = np.float32([0.25, -3.0, 2.0 ** -20])
    model = Psum()
    for w, x in zip(words, init):
        model.cells(4)[PART, w] = x
    for w, a in zip(words, adds):
        model.write(np.array([PART]), np.array([4 * w]), np.array([a]), out_dtype=Dtype.FP32, accumulate=True)
    dut = PsumPartition(PART)
    got = []

    async def bench(ctx):
        for w, x in zip(words, init):
            ctx.set(dut.host_addr, w)
            ctx.set(dut.host_wdata, int(x))
            ctx.set(dut.host_we, 1)
            await ctx.tick()
        ctx.set(dut.host_we, 0)
        for w, a in zip(words, adds):
            ctx.set(dut.wr[0].valid, 1)
            ctx.set(dut.wr[0].offset, 4 * w)
            ctx.set(dut.wr[0].value, int(np.float32(a).view(np.uint32)))
            ctx.set(dut.wr[0].accumulate, 1)
            await ctx.tick()
        ctx.set(dut.wr[0].valid, 0)
        await ctx.tick()
        got.extend(await _host_read(ctx, dut, words))

    simulate(dut, bench)
    assert got == [int(model.cells(4)[PART, w]) for w in words]


def test_bank_seed_load_then_save_keeps_all_32_bits():
    """LoadSeed through the bank's state ports, then SaveSeed of the same state: the PSUM word holds
    the loaded value bit for bit (a seed is 32 bits: the values below set bit 31 and bit 0)."""
    from tensore.rtl.psum_bank import PsumBank
    loads = {0: (3, 0x80000001), 1: (5, 0xC0FFEE01)}       # partition: (SR state, value loaded)
    words = {0: 17, 1: 2 * 512 + 40}                       # partition: word SaveSeed writes
    dut = PsumBank(2, 1)
    got = {}

    async def bench(ctx):
        for p, (i, v) in loads.items():
            ctx.set(dut.state_index[p], i)
            ctx.set(dut.state_wr_value[p], v)
        ctx.set(dut.state_wr, 0b11)
        await ctx.tick()
        ctx.set(dut.state_wr, 0)
        for p, w in words.items():
            wr = dut.wr[0][p]
            ctx.set(wr.valid, 1)
            ctx.set(wr.offset, 4 * w)
            ctx.set(wr.value, 0x12345678)           # replaced by the state
            ctx.set(wr.save, 1)
            ctx.set(wr.raw, 1)
        await ctx.tick()
        for p in words:
            ctx.set(dut.wr[0][p].valid, 0)
        for _ in range(3):
            await ctx.tick()
        for p, w in words.items():
            ctx.set(dut.host.part, p)
            ctx.set(dut.host.word, w)
            await ctx.tick()
            got[p] = ctx.get(dut.host.data)

    simulate(dut, bench)
    assert {p: hex(v) for p, v in got.items()} == {p: hex(v) for p, (_, v) in loads.items()}
