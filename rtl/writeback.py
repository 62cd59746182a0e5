"""The write-back unit (docs/timing.md, D-T40 (6), D-T42): a vector's write record leaves the array's
bottom row beside its sums and runs along the columns; in each column-output cycle every column of
the record's block presents its PSUM write (partition, offset, value, flags; seed states), the
crossbar (rtl/psum_xbar.py) routes the writes to the partitions' write ports, and the PSUM
partitions (rtl/psum.py) perform them.  A group's zeroing is presented in its first write cycle.
The host reads and writes PSUM words through `host`; `mon` (and MAVERICK's `mon2`, the second write
port) show every partition's write of the cycle."""
from amaranth.hdl import Array as HArray
from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tensore.model.addrmap import PSUM_BANK_BITS
from tensore.rtl.blackbox import black_box, prototype
from tensore.rtl.interfaces import arrays, record
from tensore.rtl.psum import PSUM_MONITOR, WORDS, PsumPartition, bank_of
from tensore.rtl.psum_xbar import PsumWriteXbar
from tensore.rtl.rowport import WREC_LAYOUT
from tensore.rtl.wires import any_of, first_of, wire

UNSUPPORTED = data.StructLayout({"collision": 1, "conflict": 1})       # the causes a write raises it for
# a group's zeroing: partitions [lo, hi), its first bank, log2 of its bank count
ZERO_LAYOUT = data.StructLayout({"valid": 1, "lo": 8, "hi": 9, "bank": PSUM_BANK_BITS, "log2": 2})


def host_port(parts: int) -> wiring.Signature:
    """The host's PSUM port: word `word` of partition `part` -> `data` one cycle later; `we` writes
    `wdata` there (a word the engine does not write in the same cycle)."""
    return wiring.Signature({"part": In(range(parts)), "word": In(range(WORDS)), "data": Out(32),
                             "we": In(1), "wdata": In(32)})


class WriteBack(wiring.Component):
    """`down`: the bottom row's write record; `out_psum`: the columns' sums; `seed_lanes`: a MAVERICK
    seed micro-op's seeds (rtl/load_unit.py); `sr`: PSUM_ROUND.  `ports` 2 (MAVERICK): each partition
    has a write port per column half.  `unsupported`: two columns of one half writing one partition
    in one cycle (`collision`), or both halves one word (`conflict`), D-T40 (6)."""

    def __init__(self, parts: int, cols: int, ports: int, *, maverick: bool, black_box: bool = False):
        self.parts, self.cols, self.ports, self.maverick, self.black_box = parts, cols, ports, maverick, black_box
        mon2 = {"mon2": Out(record(arrays(PSUM_MONITOR, parts)))} if ports == 2 else {}
        super().__init__({
            "down": In(WREC_LAYOUT), "advance": In(1), "first_cycle": In(1),
            "out_psum": In(data.ArrayLayout(32, cols)), "seed_lanes": In(data.ArrayLayout(32, cols)), "sr": In(1),
            "host": Out(host_port(parts)), "mon": Out(record(arrays(PSUM_MONITOR, parts))), **mon2,
            "unsupported": Out(UNSUPPORTED),
        })

    def blocks(self) -> list:
        """The separately exported blocks it instantiates."""
        return [prototype(PsumPartition(None, self.ports)), prototype(PsumWriteXbar(self.parts, self.cols, self.ports))]

    def elaborate(self, platform):
        m = Module()
        m.submodules.xbar = xbar = black_box(PsumWriteXbar(self.parts, self.cols, self.ports), self.black_box)
        along, strobes = self._columns(m, xbar)
        zero = self._zeroing(m, along, strobes)
        mons = [self.mon] + ([self.mon2] if self.ports == 2 else [])
        parts, conflicts = [], []
        for p in range(self.parts):
            pp = black_box(PsumPartition(None, self.ports), True) if self.black_box else PsumPartition(p, self.ports)
            m.submodules[f"psum{p}"] = pp
            parts.append(pp)
            if self.black_box:
                m.d.comb += pp.index.eq(p)
            m.d.comb += [pp.wr[k].eq(xbar.wr[k][p]) for k in range(self.ports)]
            m.d.comb += [pp.state_index.eq(xbar.state_index[p]), pp.state_wr.eq(xbar.state_wr[p]),
                         pp.state_wr_value.eq(xbar.state_wr_value[p]),
                         pp.zero_valid.eq(zero.valid & (p >= zero.lo) & (p < zero.hi)), pp.zero_bank.eq(zero.bank),
                         pp.zero_log2.eq(zero.log2), pp.host_addr.eq(self.host.word),
                         pp.host_we.eq(self.host.we & (self.host.part == p)), pp.host_wdata.eq(self.host.wdata)]
            for k, mon in enumerate(mons):
                m.d.comb += [mon.valid[p].eq(pp.mon[k].valid), mon.offset[p].eq(pp.mon[k].offset),
                             mon.bits[p].eq(pp.mon[k].bits)]
            if self.ports == 2:
                conflicts.append(pp.conflict)
        hp = Signal(range(self.parts))
        m.d.sync += hp.eq(self.host.part)
        m.d.comb += [self.host.data.eq(HArray(pp.host_data for pp in parts)[hp]),
                     self.unsupported.collision.eq(xbar.unsupported), self.unsupported.conflict.eq(any_of(conflicts))]
        return m

    def _columns(self, m, xbar):
        """The write records along the columns and each column's write (strobe, partition, offset,
        value, flags, seed state) to the crossbar; returns the records and the strobes."""
        C, half = self.cols, self.cols // self.ports
        along = [self.down] + [Signal(WREC_LAYOUT, name=f"col{c}") for c in range(1, C)]
        strobes = []
        with m.If(self.advance):
            m.d.sync += [along[c].eq(along[c - 1]) for c in range(1, C)]
        for c in range(C):
            rec = along[c]
            i = c - rec.col0
            upper = wire(m, rec.c256 & (i >= half), f"upper{c}")
            strobe = wire(m, rec.valid & (c >= rec.col0) & (c < rec.col0 + rec.cols) & self.first_cycle, f"strobe{c}")
            strobes.append(strobe)
            # seeds: LOAD writes a state, SAVE writes one to PSUM; the state is vector v (PeManageSeed)
            # or 2 x dst bank + column half (MAVERICK), the LoadSeed value the transpose's or the held seed
            if self.maverick:
                state, loaded = Cat(upper, bank_of(rec.dst_off)), self.seed_lanes[c]
            else:
                state, loaded = rec.vidx[:4], self.out_psum[c]
            m.d.comb += [xbar.strobe[c].eq(strobe),
                         xbar.part[c].eq(Mux(upper, rec.dst_part + i - half, rec.dst_part + i)),
                         xbar.offset[c].eq(Mux(upper, rec.dst_slot1, rec.dst_off)), xbar.value[c].eq(self.out_psum[c]),
                         xbar.seed[c].eq(rec.seed), xbar.bf16[c].eq(rec.out_bf16),
                         xbar.accumulate[c].eq(rec.accumulate), xbar.raw[c].eq(rec.xpose),
                         xbar.state[c].eq(state), xbar.loaded[c].eq(loaded)]
        m.d.comb += xbar.sr.eq(self.sr)
        return along, strobes

    def _zeroing(self, m, along, strobes):
        """A group's zeroing, registered in its first write cycle (column col0's output + 1): the
        partitions of its columns (one half's with c256), its first bank and bank count."""
        half = self.cols // self.ports
        firsts = [strobe & (c == along[c].col0) for c, strobe in enumerate(strobes)]
        z = Signal(ZERO_LAYOUT)
        rec = data.View(WREC_LAYOUT, first_of([(f, along[c].as_value()) for c, f in enumerate(firsts)],
                                              WREC_LAYOUT.size))
        m.d.sync += [z.valid.eq(any_of([f & along[c].zero for c, f in enumerate(firsts)])), z.lo.eq(rec.dst_part),
                     z.hi.eq(rec.dst_part + Mux(rec.cols > half, half, rec.cols)),
                     z.bank.eq(bank_of(rec.dst_off)), z.log2.eq(rec.zero_log2)]
        return z
