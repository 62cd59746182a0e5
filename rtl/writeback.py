"""The write-back unit (docs/timing.md, D-T40 (6), D-T42): a vector's write record leaves the array's
bottom row beside its sums and runs along the columns; in each column-output cycle every column of
the record's block presents its PSUM write (partition, offset, value, flags; seed states), the
crossbar (rtl/psum_xbar.py) orders the writes of each partition as the model applies them and
routes them to the partition's write ports, and the PSUM partitions (rtl/psum.py, all of them in
rtl/psum_bank.py) perform them.  A
group's zeroing is presented in its first write cycle.  The host reads and writes PSUM words
through `host`; the monitors `mon`, `mon2`, ... show every partition's first, second, ... write of
the cycle."""
from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from tensore.model.addrmap import PARTITION_BITS
from tensore.model.isa.microop import GROUPS
from tensore.rtl.blackbox import black_box, prototype
from tensore.rtl.config import Config
from tensore.rtl.interfaces import Bus, arrays, record
from tensore.rtl.psum import OFFSET_BITS, PSUM_MONITOR, STATES, bank_of
from tensore.rtl.psum_bank import ZERO_LAYOUT, PsumBank, host_port, monitor_names
from tensore.rtl.psum_xbar import PART_BITS, UNSUPPORTED, PsumWriteXbar
from tensore.rtl.rows import DOWN_LAYOUT
from tensore.rtl.rowport import WREC_LAYOUT
from tensore.rtl.wires import wire



# the zeroing of the cycle's write records, passed along the columns: whether a record in its first
# write cycle (its first column writes) zeroes, and the fields of the first record that zeroes
ZERO_CHAIN = data.StructLayout({"found": 1, "zero": 1, "dst_part": PARTITION_BITS, "cols": WREC_LAYOUT["cols"].shape,
                                "dst_off": WREC_LAYOUT["dst_off"].shape, "zero_log2": 2})
# a column's write, as the crossbar (rtl/psum_xbar.py) takes it
COLUMN_WRITE = data.StructLayout({"strobe": 1, "part": PART_BITS, "offset": OFFSET_BITS, "seed": 2, "bf16": 1,
                                  "accumulate": 1, "raw": 1, "state": range(STATES), "loaded": 32})


class WriteColumn(wiring.Component):
    """Column `index`'s write (`w`) of the write record `rec` passing it, in a column-output cycle
    (`first_cycle`): strobe, partition, offset, flags; `upper`, the record's slot-1 half (c256); seeds:
    LOAD writes a state, SAVE writes one to PSUM, the state being vector v (PeManageSeed) or 2 x dst
    bank + column half (MAVERICK), the loaded value the column's sum or its held seed (`seed_lane`).
    `z_in` -> `z_out` passes the zeroing of the first column that starts a group along the columns.
    The index is an input, so one exported module serves every column (rtl/export.py)."""

    combinational = True        # no registers: its module has no clock and reset (rtl/blackbox.py)

    def __init__(self, cols: int, half: int, maverick: bool):
        self.cols, self.half, self.maverick = cols, half, maverick
        self.module_name = f"tensore_write_column_c{cols}_h{half}" + ("_mav" if maverick else "")
        super().__init__({"index": In(range(cols)), "rec": In(WREC_LAYOUT), "first_cycle": In(1), "psum": In(32),
                          "seed_lane": In(32), "z_in": In(ZERO_CHAIN), "w": Out(COLUMN_WRITE), "upper": Out(1),
                          "z_out": Out(ZERO_CHAIN)})

    def elaborate(self, platform):
        m = Module()
        rec, c, half, w = self.rec, self.index, self.half, self.w
        i = wire(m, c - rec.col0, "i")
        upper = wire(m, rec.c256 & (i >= half), "upper_half")
        strobe = wire(m, rec.valid & (c >= rec.col0) & (c < rec.col0 + rec.cols) & self.first_cycle, "strobe")
        if self.maverick:
            state, loaded = Cat(upper, bank_of(rec.dst_off)), self.seed_lane
        else:
            state, loaded = rec.vidx[:4], self.psum
        m.d.comb += [w.strobe.eq(strobe), w.part.eq(Mux(upper, rec.dst_part + i - half, rec.dst_part + i)),
                     w.offset.eq(Mux(upper, rec.dst_slot1, rec.dst_off)), w.seed.eq(rec.seed),
                     w.bf16.eq(rec.out_bf16), w.accumulate.eq(rec.accumulate), w.raw.eq(rec.xpose),
                     w.state.eq(state), w.loaded.eq(loaded), self.upper.eq(upper)]
        first = strobe & (c == rec.col0)
        z_in, z_out = self.z_in, self.z_out
        m.d.comb += [z_out.eq(z_in), z_out.zero.eq(z_in.zero | first & rec.zero)]
        with m.If(~z_in.found & first & rec.zero):
            m.d.comb += [z_out.found.eq(1), z_out.dst_part.eq(rec.dst_part), z_out.cols.eq(rec.cols),
                         z_out.dst_off.eq(rec.dst_off), z_out.zero_log2.eq(rec.zero_log2)]
        return m


class WriteBack(wiring.Component):
    """`down`: the bottom row's write record and whether it is its micro-op's first vector;
    `out_psum`: the columns' sums; `seed_lanes`: a MAVERICK seed micro-op's seeds
    (rtl/load_unit.py); `sr`: PSUM_ROUND.  `ports`: the writes a partition takes in one cycle (one
    monitor each).  `unsupported`: a partition past the last, or more writes to one partition in
    one cycle than its ports (D-T40 (6)).  Under row tiles (D-T100) the records and sums leaving
    at the taps below the tiles above the last (`down0`, `tap0_psum`, ...) run along columns of their
    own into the crossbar, which takes the taps from the top, each tap's columns last to first."""

    def __init__(self, cfg: Config, *, black_box: bool = False):
        self.parts, self.cols, self.ports, self.maverick = cfg.psum_partitions, cfg.cols, cfg.psum_ports, cfg.maverick
        self.black_box, self.taps = black_box, cfg.rows // cfg.tile
        parts, cols, ports, maverick = self.parts, self.cols, self.ports, self.maverick
        self.half = cols // 2 if maverick else cols          # the columns of a write slot (c256)
        # the columns a micro-op's block can start at (model.isa.microop.region): a group's zeroing
        # chain runs from each to the next, so groups that start in one cycle each zero
        n = 2 if maverick else GROUPS
        self.starts = sorted({g * (cols // n) for g in range(n)} | {g * cols // n for g in range(n)})
        monitors = {name: Out(record(arrays(PSUM_MONITOR, parts))) for name in monitor_names(ports)}
        tiles = {name: In(shape) for k in range(self.taps - 1)
                 for name, shape in ((f"down{k}", DOWN_LAYOUT), (f"tap{k}_psum", Bus(32, cols)))}
        super().__init__({
            "down": In(DOWN_LAYOUT), "advance": In(1), "first_cycle": In(1), **tiles,
            "out_psum": In(Bus(32, cols)), "seed_lanes": In(Bus(32, cols)), "sr": In(1),
            "host": Out(host_port(parts)), **monitors,
            "unsupported": Out(UNSUPPORTED),
        })

    @property
    def module_name(self) -> str:
        tiles = f"_t{self.taps}" if self.taps > 1 else ""
        return f"tensore_write_back_p{self.parts}_c{self.cols}_w{self.ports}{'_c256' if self.maverick else ''}{tiles}"

    def _xbar(self):
        return PsumWriteXbar(self.parts, self.cols * self.taps, self.ports, self.half)

    def _column(self):
        return WriteColumn(self.cols, self.half, self.maverick)

    def _bank(self):
        return PsumBank(self.parts, self.ports, self.black_box, zeros=len(self.starts) * self.taps)

    def blocks(self) -> list:
        """The separately exported blocks it instantiates."""
        return [*prototype(self._bank()).blocks(), prototype(self._bank()), prototype(self._xbar()),
                prototype(self._column())]

    def elaborate(self, platform):
        m = Module()
        m.submodules.xbar = xbar = black_box(self._xbar(), self.black_box)
        m.submodules.bank = bank = black_box(self._bank(), self.black_box)
        chains = []
        for k in range(self.taps):          # the taps from the top: the crossbar's last columns first
            bottom = k == self.taps - 1
            down, psum = (self.down, self.out_psum) if bottom else \
                (getattr(self, f"down{k}"), getattr(self, f"tap{k}_psum"))
            chains += self._columns(m, xbar, down, psum, self.seed_lanes if bottom else None,
                                    (self.taps - 1 - k) * self.cols, "" if bottom else f"t{k}_")
        m.d.comb += [bank.wr.eq(xbar.wr), bank.state_index.eq(xbar.state_index), bank.state_wr.eq(xbar.state_wr),
                     bank.state_wr_value.eq(xbar.state_wr_value), bank.zero.eq(self._zeroing(m, chains)),
                     self.unsupported.eq(xbar.unsupported)]
        connect(m, flipped(self.host), bank.host)
        for name in monitor_names(self.ports):
            connect(m, flipped(getattr(self, name)), getattr(bank, name))
        return m

    def _columns(self, m, xbar, down, psum, seeds, base: int, tag: str):
        """The write records along the columns (a register per column, moved on `advance`) and each
        column's write to the crossbar (WriteColumn, crossbar column base + c); returns the zeroing
        chains' ends, one per start column: the group whose first write cycle this is (the first
        column of its block writes).  `seeds`: the seed lanes (the bottom's), else none."""
        C = self.cols
        along = [down.rec] + [Signal(WREC_LAYOUT, name=f"{tag}col{c}") for c in range(1, C)]
        with m.If(self.advance):
            m.d.sync += [along[c].eq(along[c - 1]) for c in range(1, C)]
        cols, ends, chain = [], [], None
        for c in range(C):
            if c in self.starts:
                if chain is not None:
                    ends.append(chain)
                chain = Signal(ZERO_CHAIN, name=f"{tag}zchain{c}")
            m.submodules[f"{tag}column{c}"] = col = black_box(self._column(), self.black_box)
            m.d.comb += [col.index.eq(c), col.rec.eq(along[c]), col.first_cycle.eq(self.first_cycle),
                         col.psum.eq(psum[c]), col.seed_lane.eq(seeds[c] if seeds is not None else 0),
                         col.z_in.eq(chain)]
            for f in ("strobe", "part", "offset", "seed", "bf16", "accumulate", "raw", "state", "loaded"):
                m.d.comb += getattr(xbar, f)[base + c].eq(getattr(col.w, f))
            m.d.comb += xbar.value[base + c].eq(psum[c])
            cols.append(col)
            chain = col.z_out
        m.d.comb += xbar.sr.eq(self.sr)
        if self.half < C:
            self._pairs(m, xbar, [c.w.strobe for c in cols], [c.upper for c in cols], down, base, tag)
        return ends + [chain]

    def _pairs(self, m, xbar, strobes, uppers, down, base: int, tag: str):
        """c256: column x's slot-0 write and column x + half's slot-1 write are one micro-op's (so
        slot 0 goes first, D-T40 (6)) when the record in column x is at least its micro-op's vector
        `half`: each record's vector index in its micro-op (saturating at `half`) runs beside it,
        counted from the first-vector mark of the bottom row's record."""
        half = self.half
        age = [Signal(range(half + 1), name=f"{tag}age{x}") for x in range(half + 1)]
        m.d.comb += age[0].eq(Mux(down.first, 0, Mux(age[1] >= half, half, age[1] + 1)))
        with m.If(self.advance):
            m.d.sync += [age[x].eq(age[x - 1]) for x in range(1, half + 1)]
        for x in range(half):
            m.d.comb += xbar.pair[base + x].eq(strobes[x] & strobes[x + half] & uppers[x + half] & (age[x] >= half))

    def _zeroing(self, m, chains):
        """The groups' zeroings, registered in their first write cycle (column col0's output + 1):
        the partitions of a group's columns (one half's with c256), its first bank and bank count."""
        zs = Signal(Bus(ZERO_LAYOUT, len(chains)))
        half = self.half
        for z, chain in zip(zs, chains):
            m.d.sync += [z.valid.eq(chain.zero), z.lo.eq(chain.dst_part),
                         z.hi.eq(chain.dst_part + Mux(chain.cols > half, half, chain.cols)),
                         z.bank.eq(bank_of(chain.dst_off)), z.log2.eq(chain.zero_log2)]
        return zs
