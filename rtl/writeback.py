"""The write-back unit (docs/timing.md, D-T40 (6), D-T42): a vector's write record leaves the array's
bottom row beside its sums and runs along the columns; in each column-output cycle every column of
the record's block presents its PSUM write (partition, offset, value, flags; seed states), the
crossbar (rtl/psum_xbar.py) orders the writes of each partition as the model applies them and
routes them to the partition's write ports, and the PSUM partitions (rtl/psum.py) perform them.  A
group's zeroing is presented in its first write cycle.  The host reads and writes PSUM words
through `host`; the monitors `mon`, `mon2`, ... show every partition's first, second, ... write of
the cycle."""
from amaranth.hdl import Array as HArray
from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tensore.model.addrmap import PSUM_BANK_BITS
from tensore.rtl.blackbox import black_box, prototype
from tensore.rtl.interfaces import arrays, record
from tensore.rtl.psum import PSUM_MONITOR, WORDS, PsumPartition, bank_of
from tensore.rtl.psum_xbar import UNSUPPORTED, PsumWriteXbar
from tensore.rtl.rows import DOWN_LAYOUT
from tensore.rtl.rowport import WREC_LAYOUT
from tensore.rtl.wires import any_of, first_of, wire

PSUM_PORTS = 2          # the writes a partition takes in one cycle, as the engine is built by default
# a group's zeroing: partitions [lo, hi), its first bank, log2 of its bank count
ZERO_LAYOUT = data.StructLayout({"valid": 1, "lo": 8, "hi": 9, "bank": PSUM_BANK_BITS, "log2": 2})


def monitor_names(ports: int) -> tuple:
    """The PSUM write monitors of an engine whose partitions have `ports` write ports: `mon` shows
    each partition's first write of the cycle, `mon2` its second, ..."""
    return ("mon",) + tuple(f"mon{k + 1}" for k in range(1, ports))


def host_port(parts: int) -> wiring.Signature:
    """The host's PSUM port: word `word` of partition `part` -> `data` one cycle later; `we` writes
    `wdata` there (a word the engine does not write in the same cycle)."""
    return wiring.Signature({"part": In(range(parts)), "word": In(range(WORDS)), "data": Out(32),
                             "we": In(1), "wdata": In(32)})


class WriteBack(wiring.Component):
    """`down`: the bottom row's write record and whether it is its micro-op's first vector;
    `out_psum`: the columns' sums; `seed_lanes`: a MAVERICK seed micro-op's seeds
    (rtl/load_unit.py); `sr`: PSUM_ROUND.  `ports`: the writes a partition takes in one cycle (one
    monitor each).  `unsupported`: a partition past the last, or more writes to one partition in
    one cycle than its ports (D-T40 (6))."""

    def __init__(self, parts: int, cols: int, ports: int, *, maverick: bool, black_box: bool = False):
        self.parts, self.cols, self.ports, self.maverick, self.black_box = parts, cols, ports, maverick, black_box
        self.half = cols // 2 if maverick else cols          # the columns of a write slot (c256)
        monitors = {name: Out(record(arrays(PSUM_MONITOR, parts))) for name in monitor_names(ports)}
        super().__init__({
            "down": In(DOWN_LAYOUT), "advance": In(1), "first_cycle": In(1),
            "out_psum": In(data.ArrayLayout(32, cols)), "seed_lanes": In(data.ArrayLayout(32, cols)), "sr": In(1),
            "host": Out(host_port(parts)), **monitors,
            "unsupported": Out(UNSUPPORTED),
        })

    def _xbar(self):
        return PsumWriteXbar(self.parts, self.cols, self.ports, self.half)

    def blocks(self) -> list:
        """The separately exported blocks it instantiates."""
        return [prototype(PsumPartition(None, self.ports)), prototype(self._xbar())]

    def elaborate(self, platform):
        m = Module()
        m.submodules.xbar = xbar = black_box(self._xbar(), self.black_box)
        along, strobes = self._columns(m, xbar)
        zero = self._zeroing(m, along, strobes)
        mons = [getattr(self, name) for name in monitor_names(self.ports)]
        parts = []
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
        hp = Signal(range(self.parts))
        m.d.sync += hp.eq(self.host.part)
        m.d.comb += [self.host.data.eq(HArray(pp.host_data for pp in parts)[hp]), self.unsupported.eq(xbar.unsupported)]
        return m

    def _columns(self, m, xbar):
        """The write records along the columns and each column's write (strobe, partition, offset,
        value, flags, seed state) to the crossbar; returns the records and the strobes."""
        C, half = self.cols, self.half
        along = [self.down.rec] + [Signal(WREC_LAYOUT, name=f"col{c}") for c in range(1, C)]
        strobes, uppers = [], []
        with m.If(self.advance):
            m.d.sync += [along[c].eq(along[c - 1]) for c in range(1, C)]
        for c in range(C):
            rec = along[c]
            i = c - rec.col0
            upper = wire(m, rec.c256 & (i >= half), f"upper{c}")
            strobe = wire(m, rec.valid & (c >= rec.col0) & (c < rec.col0 + rec.cols) & self.first_cycle, f"strobe{c}")
            strobes.append(strobe)
            uppers.append(upper)
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
        if half < C:
            self._pairs(m, xbar, strobes, uppers)
        return along, strobes

    def _pairs(self, m, xbar, strobes, uppers):
        """c256: column x's slot-0 write and column x + half's slot-1 write are one micro-op's (so
        slot 0 goes first, D-T40 (6)) when the record in column x is at least its micro-op's vector
        `half`: each record's vector index in its micro-op (saturating at `half`) runs beside it,
        counted from the first-vector mark of the bottom row's record."""
        half = self.half
        age = [Signal(range(half + 1), name=f"age{x}") for x in range(half + 1)]
        m.d.comb += age[0].eq(Mux(self.down.first, 0, Mux(age[1] >= half, half, age[1] + 1)))
        with m.If(self.advance):
            m.d.sync += [age[x].eq(age[x - 1]) for x in range(1, half + 1)]
        for x in range(half):
            m.d.comb += xbar.pair[x].eq(strobes[x] & strobes[x + half] & uppers[x + half] & (age[x] >= half))

    def _zeroing(self, m, along, strobes):
        """A group's zeroing, registered in its first write cycle (column col0's output + 1): the
        partitions of its columns (one half's with c256), its first bank and bank count."""
        half = self.half
        firsts = [strobe & (c == along[c].col0) for c, strobe in enumerate(strobes)]
        z = Signal(ZERO_LAYOUT)
        rec = data.View(WREC_LAYOUT, first_of([(f, along[c].as_value()) for c, f in enumerate(firsts)],
                                              WREC_LAYOUT.size))
        m.d.sync += [z.valid.eq(any_of([f & along[c].zero for c, f in enumerate(firsts)])), z.lo.eq(rec.dst_part),
                     z.hi.eq(rec.dst_part + Mux(rec.cols > half, half, rec.cols)),
                     z.bank.eq(bank_of(rec.dst_off)), z.log2.eq(rec.zero_log2)]
        return z
