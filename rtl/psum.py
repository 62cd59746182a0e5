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
from amaranth.hdl import Cat, Const, Module, Mux, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from model.addrmap import PSUM_BANK_BYTES, PSUM_BANKS, PSUM_PARTITION_BYTES
from model.psum import SR_STATE_BASE
from rtl.blackbox import instance_of
from rtl.fp.fused_add import FusedAdd
from rtl.rng import xorshift32_next

WORDS = PSUM_PARTITION_BYTES // 4
WORDS_PER_BANK = PSUM_BANK_BYTES // 4


PSUM_MODULE = "tensore_psum_partition"


class PsumPartition(wiring.Component):
    """`partition` fixes the SR states' reset values; None makes it the `index` input instead (one
    module for every partition of the exported Verilog), and the states then take their values
    while `rst` is high, so the exported engine needs a reset before use."""

    def __init__(self, partition: int | None):
        self.partition = partition
        index = {} if partition is not None else {"index": In(7)}
        super().__init__(index | {
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
        valid = [Signal(WORDS, name=f"valid_{h}") for h in ("lo", "hi")]   # per 16-bit half
        if self.partition is not None:
            states = [Signal(32, init=SR_STATE_BASE ^ ((self.partition << 8) | i), name=f"sr{i}") for i in range(16)]
        else:
            states = [Signal(32, name=f"sr{i}", reset_less=True) for i in range(16)]
            with m.If(ResetSignal()):
                m.d.sync += [states[i].eq(SR_STATE_BASE ^ Cat(Const(i, 8), self.index)) for i in range(16)]

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
        clear = Signal(WORDS)
        for b in range(PSUM_BANKS):
            dist = Signal(3, name=f"zdist{b}")
            m.d.comb += dist.eq(b - self.zero_bank)
            hit = Signal(name=f"zhit{b}")            # a signal: replicate() copies expressions
            m.d.comb += hit.eq(self.zero_valid & (dist < (Const(1, 4) << self.zero_log2)))
            m.d.comb += clear[b * WORDS_PER_BANK:(b + 1) * WORDS_PER_BANK].eq(hit.replicate(WORDS_PER_BANK))
        live = [Signal(WORDS, name=f"live_{h}") for h in ("lo", "hi")]
        m.d.comb += [live[h].eq(valid[h] & ~clear) for h in range(2)]

        # stage 2: modify and write
        s_word = s_offset[2:]
        half = s_offset[1]
        vmask = _half_mask(m, live, s_word, "v")
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
        onehot = _decode(m, s_word, WORDS)
        for h in range(2):
            sets = s_valid & (~s_bf16 | (half == h))
            m.d.sync += valid[h].eq(live[h] | Mux(sets, onehot, 0))

        # host and seed ports
        m.d.comb += hp.addr.eq(self.host_addr)
        h_word = Signal(range(WORDS))
        m.d.sync += h_word.eq(self.host_addr)
        hmask = _half_mask(m, live, h_word, "h")
        m.d.comb += self.host_data.eq(hp.data & hmask)
        with m.Switch(self.state_index):
            for i in range(16):
                with m.Case(i):
                    m.d.comb += self.state_data.eq(states[i])
                    with m.If(self.state_wr):
                        m.d.sync += states[i].eq(self.state_wr_value)
        return m


class PsumPartitionBlackBox(PsumPartition):
    """An instance of the exported `PSUM_MODULE`, its `index` tied to the partition number."""

    def __init__(self, partition: int):
        super().__init__(None)
        self.number = partition

    def elaborate(self, platform):
        m = Module()
        m.submodules.p = instance_of(self, PSUM_MODULE)
        m.d.comb += self.index.eq(self.number)
        return m


def _half_mask(m, live, word, name):
    """A 32-bit mask of `word`'s two valid bits, each repeated over its 16-bit half."""
    lo, hi = Signal(name=f"{name}_lo"), Signal(name=f"{name}_hi")
    m.d.comb += [lo.eq(live[0].bit_select(word, 1)), hi.eq(live[1].bit_select(word, 1))]
    return Cat(lo.replicate(16), hi.replicate(16))


def _decode(m, index, n):
    """One-hot of `index` (n = 4^k outputs) as two half-width decoders ANDed: a single n-bit shift
    would cost Amaranth's netlist checks n^2 steps."""
    k = (n - 1).bit_length() // 2
    lo, hi = Signal(1 << k, name="dec_lo"), Signal(n >> k, name="dec_hi")
    m.d.comb += [lo.eq(Const(1, 1) << index[:k]), hi.eq(Const(1, 1) << index[k:])]
    out = Signal(n, name="dec")
    m.d.comb += out.eq(Cat(*[lo & hi[j].replicate(1 << k) for j in range(n >> k)]))
    return out
