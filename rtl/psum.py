"""One PSUM partition: 8 banks x 2 KiB, the read-modify-write path, zeroing, SR states (D-16..D-18).

A write request presented in cycle T (the column-output cycle of docs/timing.md) reads its word in
T and writes it at the end of T + 1 (the PSUM write cycle the model reports).  The read port is
transparent to the write port, so back-to-back writes to one cell chain correctly.
  FP32 cell:  overwrite v, or accumulate RNE_fp32(old + v)
  BF16 cell:  round(v) or round(RNE_fp32(bf16_to_fp32(old) + v)), round = RNE or SR (D-08) with the
              state of (bank, parity of the in-bank element index), advanced once per write (D-09)
  raw:        the bits as they are (transposes, SaveSeed)
Zeroing invalidates 16-bit halves: an invalid half reads as 0 (one cycle for any number of banks, as
the model does it in the group's first write cycle, before that cycle's write).  Validity is kept as
epochs (D-T41): each bank has a 32-bit epoch register, each half of each word a tag memory entry; a
half is valid while its tag equals its bank's epoch, a write stores the epoch, zeroing a bank (or a
reset) advances it.  No per-word registers: the simulators see three memories, not 8192 flip-flops.

A partition takes `ports` writes a cycle, in port order (the crossbar's order, which is the model's,
D-T40 (6)): a write reads the word as the earlier writes of its cycle leave it (per 16-bit half)
and the SR state as they advance it, and of several writes to one half only the last is stored."""
from amaranth.hdl import Array, Cat, Const, Module, Mux, ResetSignal, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from tensore.model.addrmap import (PARTITION_BITS, PSUM_BANK_BITS, PSUM_BANK_BYTES, PSUM_BANKS, PSUM_OFFSET_BITS,
                                   PSUM_PARTITION_BYTES, PSUM_SR_SLOTS)
from tensore.model.psum import SR_STATE_BASE
from tensore.rtl.fp.fused_add import CANONICAL_NAN, FusedAdd, drive_term
from tensore.rtl.fp.raw import unpack_fp32
from tensore.rtl.fp.round import bf16_round
from tensore.rtl.interfaces import Bus
from tensore.rtl.rng import xorshift32_next
from tensore.rtl.wires import any_of

EPOCH_BITS = 32

WORDS = PSUM_PARTITION_BYTES // 4
WORDS_PER_BANK = PSUM_BANK_BYTES // 4
BANK_SHIFT = WORDS_PER_BANK.bit_length() - 1          # a word address's bank: the bits above
OFFSET_BITS = PSUM_OFFSET_BITS                          # a byte offset in a partition
STATES = PSUM_BANKS * PSUM_SR_SLOTS                     # SR states of a partition (D-16)

# One write of a partition's write port, as the crossbar (rtl/psum_xbar.py) presents it and the
# partition performs it; `save` (SaveSeed) writes the partition's selected SR state, not `value`.
PSUM_WRITE = data.StructLayout({"valid": 1, "offset": OFFSET_BITS, "value": 32, "bf16": 1, "accumulate": 1,
                                "raw": 1, "sr": 1, "save": 1})
# the write a port performs this cycle (the write monitors): `bf16` a 16-bit write of the half at
# `offset` (`bits` in its low 16 bits), else a 32-bit word
PSUM_MONITOR = data.StructLayout({"valid": 1, "offset": OFFSET_BITS, "bits": 32, "bf16": 1})


def bank_of(offset):
    """The bank of a byte offset in a partition."""
    return offset[OFFSET_BITS - PSUM_BANK_BITS:OFFSET_BITS]


def bank_hits(m, bank, log2, name: str) -> Signal:
    """The banks a group's zeroing clears: 1 / 2 / 4 / 8 from `bank`, wrapping (one bit per bank)."""
    hits = Signal(PSUM_BANKS, name=name)
    for b in range(PSUM_BANKS):
        dist = Signal(PSUM_BANK_BITS, name=f"{name}_dist{b}")
        m.d.comb += [dist.eq(b - bank), hits[b].eq(dist < (Const(1, 4) << log2))]
    return hits


class PsumPartition(wiring.Component):
    """`partition` fixes the SR states' reset values; None makes it the `index` input instead (one
    module for every partition of the exported Verilog), and the states then take their values
    while `rst` is high, so the exported engine needs a reset before use.

    `ports`: the writes it takes in one cycle (`wr[k]` in, `mon[k]` out), acting in port order as
    the model applies the writes of one cycle, port 0 first (D-T40 (6))."""

    repeated = True            # instantiated many times: a Verilator hierarchical block (rtl/export.py)

    def __init__(self, partition: int | None, ports: int = 1):
        self.partition, self.ports = partition, ports
        index = {} if partition is not None else {"index": In(PARTITION_BITS)}
        super().__init__(index | {
            "wr": In(Bus(PSUM_WRITE, ports)), "mon": Out(Bus(PSUM_MONITOR, ports)),
            "zero_hits": In(PSUM_BANKS),                                 # the banks zeroed this cycle
            "host_addr": In(range(WORDS)), "host_data": Out(32),          # read, data next cycle
            "host_we": In(1), "host_wdata": In(32),                      # write a word (both halves valid)
            "state_index": In(range(STATES)), "state_data": Out(32),      # SR state read (SaveSeed)
            "state_wr": In(1), "state_wr_value": In(32),                  # LoadSeed
        })

    @property
    def module_name(self) -> str:
        return "tensore_psum_partition" + ("" if self.ports == 1 else f"_{self.ports}w")

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(shape=32, depth=WORDS, init=[])
        wps = [mem.write_port(granularity=16) for _ in range(self.ports)]
        host_wp = mem.write_port()
        rps = [mem.read_port(transparent_for=wps + [host_wp]) for _ in range(self.ports)]
        hp = mem.read_port()
        # the epoch tags of each word's two halves, read beside the data (same ports, same transparency)
        m.submodules.tags = tags = Memory(shape=2 * EPOCH_BITS, depth=WORDS, init=[])
        twps = [tags.write_port(granularity=EPOCH_BITS) for _ in range(self.ports)]
        host_twp = tags.write_port()
        trps = [tags.read_port(transparent_for=twps + [host_twp]) for _ in range(self.ports)]
        htp = tags.read_port()
        states = self._states(m)

        # zeroing, presented in the groups' first write cycle (stage 2, `bank_hits`): it takes effect
        # before that cycle's writes and after earlier ones (a reset advances every epoch too: the
        # words of before the reset read as zero)
        ep = _Epochs(m, self.zero_hits)

        paths = []                                   # this cycle's earlier writes, in port order
        for k in range(self.ports):
            wr = Signal(PSUM_WRITE, name=f"wr{k}_in")           # SaveSeed writes the selected state
            m.d.comb += [wr.eq(self.wr[k]), wr.value.eq(Mux(self.wr[k].save, self.state_data, self.wr[k].value))]
            paths.append(_write_path(m, k, wr, (rps[k], trps[k]), ep, states, paths, self.mon[k]))
        _store(m, paths, wps, twps, ep)
        # the host writes a whole word (while the engine does not write it: same-cycle order undefined)
        host_epoch = ep.after_of(self.host_addr)
        m.d.comb += [host_wp.addr.eq(self.host_addr), host_wp.data.eq(self.host_wdata), host_wp.en.eq(self.host_we),
                     host_twp.addr.eq(self.host_addr), host_twp.data.eq(Cat(host_epoch, host_epoch)),
                     host_twp.en.eq(self.host_we)]

        # host and seed ports
        m.d.comb += [hp.addr.eq(self.host_addr), htp.addr.eq(self.host_addr)]
        h_word = Signal(range(WORDS))
        m.d.sync += h_word.eq(self.host_addr)
        hmask = ep.mask(htp.data, h_word, "h")
        m.d.comb += self.host_data.eq(hp.data & hmask)
        with m.Switch(self.state_index):
            for i in range(STATES):
                with m.Case(i):
                    m.d.comb += self.state_data.eq(states[i])
                    with m.If(self.state_wr):
                        m.d.sync += states[i].eq(self.state_wr_value)
        return m

    def _states(self, m) -> list:
        """The SR states (D-09 reset values: fixed, or from `index` while `rst` is high)."""
        if self.partition is not None:
            return [Signal(32, init=SR_STATE_BASE ^ ((self.partition << 8) | i), name=f"sr{i}") for i in range(STATES)]
        states = [Signal(32, name=f"sr{i}", reset_less=True) for i in range(STATES)]
        with m.If(ResetSignal()):
            m.d.sync += [states[i].eq(SR_STATE_BASE ^ Cat(Const(i, 8), self.index)) for i in range(STATES)]
        return states


class _Epochs:
    """The bank epochs, advanced by this cycle's zeroing `hits` (one bit per bank) and by a reset:
    `mask` turns a word's tags into its valid-half mask, `after_of` is the epoch a write of this
    cycle stores (its bank's epoch after this cycle's zeroing)."""

    def __init__(self, m, hits):
        self.m, self.hits = m, hits
        self.epochs = [Signal(EPOCH_BITS, init=1, reset_less=True, name=f"epoch{b}") for b in range(PSUM_BANKS)]
        self.after = [Signal(EPOCH_BITS, name=f"epoch_after{b}") for b in range(PSUM_BANKS)]
        for b, (now, after) in enumerate(zip(self.epochs, self.after)):
            m.d.comb += after.eq(Mux(hits[b], now + 1, now))
            with m.If(hits[b] | ResetSignal()):
                m.d.sync += now.eq(now + 1)

    def _bank(self, word):
        return word[BANK_SHIFT:BANK_SHIFT + PSUM_BANK_BITS]

    def after_of(self, word):
        return Array(self.after)[self._bank(word)]

    def mask(self, tags, word, name):
        """A 32-bit mask of `word`'s two valid halves, each repeated over its 16 bits."""
        bank = self._bank(word)
        now = Array(self.epochs)[bank]
        lo, hi = Signal(name=f"{name}_lo"), Signal(name=f"{name}_hi")
        cleared = self.hits.bit_select(bank, 1)
        self.m.d.comb += [lo.eq((tags[:EPOCH_BITS] == now) & ~cleared),
                          hi.eq((tags[EPOCH_BITS:] == now) & ~cleared)]
        return Cat(lo.replicate(16), hi.replicate(16))


# what the later writes of a cycle see of an earlier one: its word, the halves it writes (enable),
# the word it writes, and its SR state index (STATES: none advanced) with the advanced state
_PATH = data.StructLayout({"word": range(WORDS), "en": 2, "data": 32, "sr_idx": range(STATES + 1), "sr_next": 32})


def _write_path(m, k, wr, rps, ep, states, earlier, mon):
    """Write port k: stage 1 reads the word and its tags, stage 2 modifies them after the `earlier`
    ports' writes of the cycle (their halves of the same word, their SR states).  Returns its _PATH."""
    n = f"p{k}_"
    rp, trp = rps
    word = wr.offset[2:]
    m.d.comb += [rp.addr.eq(word), trp.addr.eq(word)]
    s = Signal(PSUM_WRITE, name=n + "stage")
    m.d.sync += s.eq(wr)
    s_word = s.offset[2:]
    half = s.offset[1]
    vmask = ep.mask(trp.data, s_word, n + "v")
    lo, hi = Signal(16, name=n + "old_lo"), Signal(16, name=n + "old_hi")
    m.d.comb += [lo.eq((rp.data & vmask)[:16]), hi.eq((rp.data & vmask)[16:])]
    for e in earlier:                         # the last earlier write of a half of this word wins
        with m.If(e.word == s_word):
            with m.If(e.en[0]):
                m.d.comb += lo.eq(e.data[:16])
            with m.If(e.en[1]):
                m.d.comb += hi.eq(e.data[16:])
    old16 = Mux(half, hi, lo)
    old32 = Mux(s.bf16, Cat(Const(0, 16), old16), Cat(lo, hi))
    m.submodules[n + "add"] = add = FusedAdd(24)
    value = s.value
    v = unpack_fp32(value)
    m.d.comb += [add.psum.eq(Mux(s.accumulate, old32, 0)), *drive_term(add, v)]
    total = Signal(32, name=n + "total")      # exact overwrite (+0 + v would turn -0 into +0), else the sum
    m.d.comb += total.eq(Mux(s.accumulate, add.result, Mux(v.nan, CANONICAL_NAN, value)))

    # bf16 rounding with the state of (bank, parity of the in-bank element index), as the earlier
    # writes of the cycle leave it
    idx = Signal(range(STATES), name=n + "state_idx")
    m.d.comb += idx.eq(Cat(s.offset[1], bank_of(s.offset)))
    state = Signal(32, name=n + "state")
    with m.Switch(idx):
        for i in range(STATES):
            with m.Case(i):
                m.d.comb += state.eq(states[i])
    for e in earlier:
        with m.If(e.sr_idx == idx):
            m.d.comb += state.eq(e.sr_next)
    nxt = Signal(32, name=n + "next")
    m.d.comb += nxt.eq(xorshift32_next(state))
    code16 = Signal(16, name=n + "code16")
    m.d.comb += code16.eq(bf16_round(total, nxt[:16], s.sr))
    advances = s.valid & s.bf16 & s.sr & ~s.raw
    with m.If(advances):                      # a later port's advance of the same state comes after
        with m.Switch(idx):
            for i in range(STATES):
                with m.Case(i):
                    m.d.sync += states[i].eq(nxt)

    data16 = Mux(s.raw, value[:16], code16)
    bits = Mux(s.bf16, data16, Mux(s.raw, value, total))
    m.d.comb += [mon.valid.eq(s.valid), mon.offset.eq(s.offset), mon.bits.eq(bits), mon.bf16.eq(s.bf16)]
    out = Signal(_PATH, name=n + "out")
    m.d.comb += [out.word.eq(s_word), out.en.eq(Mux(s.valid, Mux(s.bf16, Mux(half, 0b10, 0b01), 0b11), 0)),
                 out.data.eq(Mux(s.bf16, Cat(data16, data16), bits)),
                 out.sr_idx.eq(Mux(advances, idx, STATES)), out.sr_next.eq(nxt)]
    return out


def _store(m, paths, wps, twps, ep):
    """The memory writes of the cycle: each port's halves, less those a later port writes again."""
    for j, (e, wp, twp) in enumerate(zip(paths, wps, twps)):
        again = Signal(2, name=f"p{j}_again")
        m.d.comb += again.eq(any_of([f.en & (f.word == e.word).replicate(2) for f in paths[j + 1:]]))
        en = Signal(2, name=f"p{j}_store")
        m.d.comb += en.eq(e.en & ~again)
        stored = ep.after_of(e.word)
        m.d.comb += [wp.addr.eq(e.word), wp.data.eq(e.data), wp.en.eq(en),
                     twp.addr.eq(e.word), twp.data.eq(Cat(stored, stored)), twp.en.eq(en)]

