"""One PSUM partition: 8 banks x 2 KiB, the read-modify-write path, zeroing, SR states (D-16..D-18).

A write request presented in cycle T (the column-output cycle of docs/timing.md) reads its word in
T and writes it at the end of T + 1 (the PSUM write cycle the model reports).  The read port is
transparent to the write port, so back-to-back writes to one cell chain correctly.
  FP32 cell:  overwrite v, or accumulate RNE_fp32(old + v)
  BF16 cell:  round(v) or round(RNE_fp32(bf16_to_fp32(old) + v)), round = RNE or SR (D-08) with the
              state of (bank, parity of the in-bank element index), advanced once per write (D-09)
  raw:        the bits as they are (transposes, SaveSeed)
Zeroing clears valid bits per 16-bit half: an invalid half reads as 0 (one cycle for any number of
banks, as the model does it in the group's first write cycle, before that cycle's write)."""
from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from model.addrmap import PSUM_BANK_BYTES, PSUM_BANKS, PSUM_PARTITION_BYTES
from model.psum import SR_STATE_BASE
from rtl.fp.fused_add import FusedAdd
from rtl.rng import xorshift32_next

WORDS = PSUM_PARTITION_BYTES // 4
WORDS_PER_BANK = PSUM_BANK_BYTES // 4


class PsumPartition(wiring.Component):
    def __init__(self, partition: int):
        self.partition = partition
        super().__init__({
            "wr_valid": In(1), "wr_offset": In(14), "wr_value": In(32), "wr_bf16": In(1),
            "wr_accumulate": In(1), "wr_raw": In(1), "wr_sr": In(1),
            "zero_valid": In(1), "zero_bank": In(3), "zero_log2": In(2),
            "host_addr": In(range(WORDS)), "host_data": Out(32),          # read, data next cycle
            "state_index": In(4), "state_data": Out(32),                  # SR state read
            "state_wr": In(1), "state_wr_value": In(32),                  # LoadSeed
            "mon_valid": Out(1), "mon_offset": Out(14), "mon_bits": Out(32),  # the write of this cycle
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(shape=32, depth=WORDS, init=[])
        wp = mem.write_port(granularity=16)
        rp = mem.read_port(transparent_for=(wp,))
        hp = mem.read_port()
        valid = Signal(2 * WORDS)                                       # one bit per 16-bit half
        states = [Signal(32, init=SR_STATE_BASE ^ ((self.partition << 8) | i), name=f"sr{i}") for i in range(16)]

        # stage 1: read the word
        word = self.wr_offset[2:]
        m.d.comb += rp.addr.eq(word)
        s_valid, s_offset, s_value = Signal(), Signal(14), Signal(32)
        s_bf16, s_acc, s_raw, s_sr = Signal(), Signal(), Signal(), Signal()
        m.d.sync += [s_valid.eq(self.wr_valid), s_offset.eq(self.wr_offset), s_value.eq(self.wr_value),
                     s_bf16.eq(self.wr_bf16), s_acc.eq(self.wr_accumulate), s_raw.eq(self.wr_raw),
                     s_sr.eq(self.wr_sr)]

        # zeroing, presented in the group's first write cycle (stage 2): 1 / 2 / 4 / 8 banks from
        # zero_bank, wrapping; it takes effect before that cycle's write and after earlier ones
        clear = Signal(2 * WORDS)
        bank_bits = 2 * WORDS_PER_BANK
        for b in range(PSUM_BANKS):
            dist = Signal(3, name=f"zdist{b}")
            m.d.comb += dist.eq(b - self.zero_bank)
            hit = self.zero_valid & (dist < (Const(1, 4) << self.zero_log2))
            m.d.comb += clear[b * bank_bits:(b + 1) * bank_bits].eq(hit.replicate(bank_bits))
        live = Signal(2 * WORDS)
        m.d.comb += live.eq(valid & ~clear)

        # stage 2: modify and write
        s_word = s_offset[2:]
        half = s_offset[1]
        vmask = Cat(live.bit_select(Cat(Const(0, 1), s_word), 1).replicate(16),
                    live.bit_select(Cat(Const(1, 1), s_word), 1).replicate(16))
        old = rp.data & vmask
        old16 = Mux(half, old[16:], old[:16])
        old32 = Mux(s_bf16, Cat(Const(0, 16), old16), old)
        m.submodules.add = add = FusedAdd(24)
        e, f = s_value[23:31], s_value[:23]
        m.d.comb += [add.psum.eq(Mux(s_acc, old32, 0)), add.t_sign.eq(s_value[31]),
                     add.t_mag.eq(Cat(f, e != 0)), add.t_exp.eq(Mux(e == 0, -149, e - 150)),
                     add.t_nan.eq((e == 0xFF) & (f != 0)), add.t_inf.eq((e == 0xFF) & (f == 0))]
        total = Signal(32)            # exact overwrite (+0 + v would turn -0 into +0), else the sum
        m.d.comb += total.eq(Mux(s_acc, add.result, Mux((e == 0xFF) & (f != 0), 0x7FC00000, s_value)))

        # bf16 rounding
        bank = s_offset[11:14]
        parity = s_offset[1]                       # in-bank element index parity of a 2-byte cell
        idx = Cat(parity, bank)
        state = Signal(32)
        with m.Switch(idx):
            for i in range(16):
                with m.Case(i):
                    m.d.comb += state.eq(states[i])
        nxt = Signal(32)
        m.d.comb += nxt.eq(xorshift32_next(state))
        t_nan = (total[23:31] == 0xFF) & (total[:23] != 0)
        t_inf = (total[23:31] == 0xFF) & (total[:23] == 0)
        sr_code = Mux(t_inf, total[16:], (total + nxt[:16])[16:32])
        rne_code = (total + 0x7FFF + total[16])[16:32]
        code16 = Signal(16)
        m.d.comb += code16.eq(Mux(t_nan, Cat(Const(0x7FC0, 15), total[31]), Mux(s_sr, sr_code, rne_code)))
        with m.If(s_valid & s_bf16 & s_sr & ~s_raw):
            with m.Switch(idx):
                for i in range(16):
                    with m.Case(i):
                        m.d.sync += states[i].eq(nxt)

        data16 = Mux(s_raw, s_value[:16], code16)
        m.d.comb += [self.mon_valid.eq(s_valid), self.mon_offset.eq(s_offset),
                     self.mon_bits.eq(Mux(s_bf16, data16, Mux(s_raw, s_value, total)))]
        m.d.comb += [wp.addr.eq(s_word),
                     wp.data.eq(Mux(s_bf16, Cat(data16, data16), Mux(s_raw, s_value, total))),
                     wp.en.eq(Mux(s_valid, Mux(s_bf16, Mux(half, 0b10, 0b01), 0b11), 0))]
        set_bits = Signal(2 * WORDS)
        with m.If(s_valid):
            m.d.comb += set_bits.eq(Mux(s_bf16, 1 << half, 0b11) << Cat(Const(0, 1), s_word))

        m.d.sync += valid.eq(live | set_bits)

        # host and seed ports
        m.d.comb += hp.addr.eq(self.host_addr)
        h_word = Signal(range(WORDS))
        m.d.sync += h_word.eq(self.host_addr)
        hmask = Cat(live.bit_select(Cat(Const(0, 1), h_word), 1).replicate(16),
                    live.bit_select(Cat(Const(1, 1), h_word), 1).replicate(16))
        m.d.comb += self.host_data.eq(hp.data & hmask)
        with m.Switch(self.state_index):
            for i in range(16):
                with m.Case(i):
                    m.d.comb += self.state_data.eq(states[i])
                    with m.If(self.state_wr):
                        m.d.sync += states[i].eq(self.state_wr_value)
        return m
