"""The load unit: everything that reaches the array through the stationary SBUF port (docs/timing.md,
D-T38, D-T40): weight loads (plain, transposing, TAG_WEIGHT, LUT, MX with block scales), LdTags,
PeManageSeed's identity rows, PeRegWrite's SBUF value, ConvLutLoad's table and a MAVERICK seed
micro-op's seeds.

Row k of a load is requested in cycle t + k (+1 for the request register) and its answer, `L - 1`
cycles later, goes to the array's weight (or tag) bus as row k: the element of pattern position m
is routed to its physical column (D-14 load order) by a lane shifter.  The ConvLutLoad table
(D-T15) lives here: weight lanes read it, and each array row reads it through `lut` for the LUT
operands of the moving data (MV_ELEMS per row: a MatmulSparse vector's fmaps, rtl/rows.py)."""
from amaranth.hdl import Array as HArray
from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from tensore.model.dtypes import Dtype, Gen
from tensore.model.addrmap import PARTITION_BITS, SBUF_OFFSET_BITS
from tensore.model.isa.layouts import LUT_ENTRIES
from tensore.model.isa.microop import MX_TILE, SEED_STATES
from tensore.model.timing import column_load
from tensore.rtl.fp.raw import e8m0_scale
from tensore.rtl.blackbox import black_box, prototype
from tensore.rtl.config import Config
from tensore.rtl.interfaces import Bus, request_port
from tensore.rtl.isa import Kind, MxOrder, uop_layout
from tensore.rtl.links import REG_FETCH, issue_link, lut_link, tag_load, weight_load
from tensore.rtl.mx import IDENTITY_MAP, MAP_FIELDS, block_first_row, map_of, tile
from tensore.rtl.pe import build_suffix, code_layout, weight_layout
from tensore.rtl.rowport import MV_ELEMS
from tensore.rtl.wires import any_of, record, span, wire

IDENTITY_CODES = SEED_STATES     # PeManageSeed: a row of the identity, one code per SR state

# The stationary port (D-T38 (5), D-T40): a gather of `count` elements of one partition along a
# TENSOR3D pattern of positions, each position p at the mapped address (rtl/mx.py MAP_FIELDS; the
# identity for plain patterns) from `off`, in elements of `esize` bytes (`nib`: 4-bit elements, in
# nibbles from nibble address 2 * off), or (`xpose`) `xpack` elements of each of count / xpack
# partitions from `part` on: answer element e is partition part + e div xpack's element at position
# first + e mod xpack of the TENSOR3D pattern (position i0 + n0 * (i1 + n1 * i2) at sum(i_d * step_d));
# element e of the answer in bits 32e..32e+31.  The scale port: `count` bytes (one block scale per column).
STATIONARY_REQUEST = {"valid": 1, "part": PARTITION_BITS, "off": SBUF_OFFSET_BITS, "esize": 3, "step": data.ArrayLayout(signed(16), 3),
                      "num": data.ArrayLayout(16, 3), "count": 16, "xpose": 1, "nib": 1, **MAP_FIELDS,
                      "first": 16, "xpack": 4}
SCALE_REQUEST = {"valid": 1, "part": PARTITION_BITS, "off": SBUF_OFFSET_BITS, "count": 16}

# what an answer is for, carried L - 1 cycles beside the request
LOAD_META = data.StructLayout({
    "valid": 1, "reg": 1, "reg_index": 8, "row": 8, "col0": 9, "cols": 9, "lcf": 1, "pack": 4, "dtype": 8,
    "tags": 1, "tagw": 1, "force": 4, "lut": 1, "lut_load": 1, "ident": 1, "seed_data": 1, "mx": 1, "sc_valid": 1})


UNSUPPORTED = data.StructLayout({"pack": 1, "dtype": 1, "sparse32": 1})     # the causes it raises `unsupported` for


def stationary_port(cols: int, pack: int, column_rows: int = 0) -> wiring.Signature:
    """The stationary SBUF port: a row's C x PK elements (or the LUT's entries) in 32-bit words; with
    `column_rows` the answer also carries the column-serial requests' (rtl/column_load.py, D-T102),
    MV_ELEMS words a row."""
    return request_port(STATIONARY_REQUEST, Bus(32, max(cols * pack, LUT_ENTRIES, MV_ELEMS * column_rows)))


def scale_port(cols: int) -> wiring.Signature:
    return request_port(SCALE_REQUEST, Bus(8, cols))


class LoadUnit(wiring.Component):
    """`issue`: the sequencer's micro-op; the weight and tag loads (`wl`, `tag`) go to the array,
    `reg` back to the sequencer (a fetched PeRegWrite value), the table's entries to the row ports
    (`lut`), all links of rtl/links.py; `seed_lanes` to the write-back unit (MAVERICK seed
    micro-ops).  `unsupported`: a load needing more elements per PE than built, or (a specialised
    build, D-T62) a dtype the PEs do not carry; unless built with `sparse32`, a
    MatmulSparse of 32-bit values (FP32 data, or a LUT table of FP32 entries: fmaps 1-3 ride 16-bit
    code slots, D-T34, D-T40 (3))."""

    def __init__(self, cfg: Config, *, black_box: bool = False):
        """`black_box`: the LUT table is an instance of its exported module.  Under a profile with
        `column_loads` plain weight loads take the column-serial port (rtl/column_load.py, D-T99), not
        this one."""
        self.gen, self.rows, self.cols, self.pack, self.L, self.dtypes = cfg.generation, cfg.rows, cfg.cols, \
            cfg.pack, cfg.sbuf_latency, cfg.dtypes
        self.sparse32, self.black_box, self.column_loads = cfg.sparse32, black_box, cfg.column_loads
        rows, cols, pack = self.rows, self.cols, self.pack
        super().__init__({
            "issue": In(issue_link()),
            "st": Out(stationary_port(cols, pack)), "sc": Out(scale_port(cols)),
            "reg": Out(REG_FETCH),
            "wl": Out(weight_load(rows, cols, pack)), "tag": Out(tag_load(rows, cols)),
            "seed_lanes": Out(Bus(32, cols)),
            "lut": In(lut_link(rows)),
            "unsupported": Out(UNSUPPORTED),
        })

    export_apart = True        # a large conversion: rtl/export.py converts it in a second process (D-T82)

    @property
    def module_name(self) -> str:
        return (f"tensore_load_unit_{self.gen.name.lower()}_r{self.rows}_c{self.cols}_p{self.pack}_l{self.L}"
                f"{build_suffix(self.dtypes, self.sparse32)}{'_cw' if self.column_loads else ''}")

    def _lut(self):
        return LutTable(self.cols + self.rows * MV_ELEMS)

    def blocks(self) -> list:
        """The separately exported blocks it instantiates."""
        return [prototype(self._lut())]

    def elaborate(self, platform):
        m = Module()
        meta = self._requests(m)
        resp = self.st.resp.data
        m.d.comb += [self.reg.apply.eq(meta.reg), self.reg.value.eq(resp[0]), self.reg.index.eq(meta.reg_index)]
        # a MAVERICK seed micro-op's seeds, held for its column writes (it is a barrier: one at a time)
        with m.If(meta.seed_data):
            m.d.sync += self.seed_lanes.eq(resp.as_value()[:32 * self.cols])
        m.submodules.lut = lut = black_box(self._lut(), self.black_box)
        m.d.comb += [lut.load.eq(meta.lut_load), lut.count.eq(meta.cols), lut.dtype.eq(meta.dtype),
                     lut.entries.eq(resp.as_value()[:32 * LUT_ENTRIES]), self.lut.dtype.eq(lut.table_dtype),
                     # readers: the weight lanes' (a LUT load's codes), then the rows'
                     lut.index.eq(Cat(*(resp[c][:8] for c in range(self.cols)), self.lut.index)),
                     self.lut.entry.eq(lut.entry.as_value()[32 * self.cols:])]
        self._lanes(m, meta, lut)
        if not self.sparse32:
            u = self.issue.uop
            values = Mux(u.lut, lut.table_dtype, u.dtype)
            m.d.comb += self.unsupported.sparse32.eq(self.issue.valid & (u.kind == Kind.MATMUL) & (u.fmaps != 0) &
                                                     (values == Dtype.FP32))
        return m

    def _requests(self, m):
        """The stationary and scale requests of each row (registered), and the answer's meta data
        `L - 1` cycles later (returned)."""
        u, issue = self.issue.uop, self.issue.valid
        active, k_reg, held = Signal(), Signal(8), Signal(uop_layout())
        any_ld = issue & ((u.kind == Kind.LOAD) | (u.kind == Kind.SEED)) & u.supported
        column = column_load(u.tags, u.tagw, u.xpose, u.mx, u.lut, u.lcf) & (u.kind == Kind.LOAD)
        ld_go = wire(m, any_ld & ~column if self.column_loads else any_ld, "ld_go")
        rw_go = wire(m, issue & (u.kind == Kind.REGWRITE) & ~self.issue.bypass, "rw_go")   # PeRegWrite: same port
        lut_go = wire(m, issue & (u.kind == Kind.LUT), "lut_go")   # and ConvLutLoad: all entries in one gather
        # and a MAVERICK seed micro-op: its 2 x half INT32 seeds (LoadSeed) in one gather
        maverick = Const(int(self.gen.layout == Gen.MAVERICK), 1)
        mseed_go = wire(m, issue & (u.kind == Kind.MATMUL) & (u.seed != 0) & maverick, "mseed_go")
        cur = wire(m, Mux(ld_go | rw_go | lut_go | mseed_go, u.as_value(), held.as_value()), "ld_cur", uop_layout())
        k = wire(m, Mux(active, k_reg, 0), "ld_row")
        ld_req = wire(m, ld_go | active, "ld_req")
        ident = wire(m, cur.kind == Kind.SEED, "ld_ident")   # every row gathers the identity codes, keeps code k
        ldx = wire(m, cur.xpose & ~ident & ld_req, "ld_xpose")
        with m.If(ld_go):
            m.d.sync += [active.eq(u.rows > 1), k_reg.eq(1), held.eq(u)]
        with m.Elif(active):
            m.d.sync += k_reg.eq(k_reg + 1)
            with m.If(k_reg + 1 >= held.rows):
                m.d.sync += active.eq(0)
        st, sc = self.st.req, self.sc.req
        st_valid = Signal()
        m.d.sync += [st_valid.eq(ld_req | rw_go | lut_go | mseed_go),
                     st.part.eq(Mux(ident, cur.id_part, cur.src_part + Mux(ldx, 0, k))),
                     st.off.eq(Mux(ident, cur.id_off, cur.src_off)),
                     # a transposing load's row k: positions k * pack + j of every column's partition
                     st.xpose.eq(ldx), st.first.eq(k * cur.pack), st.xpack.eq(cur.pack),
                     st.esize.eq(Mux(rw_go, 4, Mux(ident, cur.id_esize, cur.esize))),
                     st.count.eq(Mux(rw_go, 1, Mux(ident, IDENTITY_CODES, Mux(cur.tags, (cur.cols + 3) >> 2,
                                                                              cur.cols * cur.pack))))]
        mx_steps, mx_nums = mx_pattern(cur)
        for d in range(3):
            m.d.sync += [st.step[d].eq(Mux(ident, cur.id_step if d == 0 else 0,
                                           Mux(cur.mx & ~ldx, mx_steps[d], cur.src_step[d]))),
                         st.num[d].eq(Mux(ident, IDENTITY_CODES if d == 0 else 1,
                                          Mux(cur.mx & ~ldx, mx_nums[d], cur.src_num[d])))]
        mx_map = map_of(cur.src_num, cur.src_step)     # MX: positions are element indices of the data pattern
        m.d.sync += [getattr(st, f).eq(Mux(cur.mx & ~ident, mx_map[f], IDENTITY_MAP[f])) for f in MAP_FIELDS]
        # MX: the row's block scales, one byte per column in the block's first partition
        m.d.sync += [st.nib.eq(cur.nib & (cur.mx | ldx)), sc.valid.eq(ld_req & cur.mx & cur.sc_valid),
                     sc.part.eq(cur.sc_part + block_first_row(k, cur.pack)), sc.off.eq(cur.sc_off),
                     sc.count.eq(cur.cols)]
        m.d.comb += st.valid.eq(st_valid)
        pipe = [Signal(LOAD_META, name=f"wl_meta{i}") for i in range(self.L)]
        m.d.sync += [pipe[0].valid.eq(ld_req), pipe[0].reg.eq(rw_go), pipe[0].reg_index.eq(u.reg),
                     pipe[0].row.eq(cur.row0 + k), pipe[0].col0.eq(cur.col0), pipe[0].cols.eq(cur.cols),
                     pipe[0].lcf.eq(cur.lcf), pipe[0].pack.eq(cur.pack), pipe[0].dtype.eq(cur.dtype),
                     pipe[0].tags.eq(cur.tags), pipe[0].tagw.eq(cur.tagw), pipe[0].force.eq(cur.force_tags),
                     pipe[0].lut.eq(cur.lut), pipe[0].lut_load.eq(lut_go), pipe[0].ident.eq(ident),
                     pipe[0].seed_data.eq(mseed_go), pipe[0].mx.eq(cur.mx), pipe[0].sc_valid.eq(cur.sc_valid)]
        m.d.sync += [pipe[i].eq(pipe[i - 1]) for i in range(1, self.L)]
        too_many = u.pack > self.pack                       # more elements per PE than built for
        missing = ~any_of([u.dtype == int(x) for x in self.dtypes]) if self.dtypes is not None else Const(0)
        m.d.comb += [self.unsupported.pack.eq(any_ld & too_many),
                     self.unsupported.dtype.eq(any_ld & (u.kind == Kind.LOAD) & missing)]
        return pipe[-1]

    def _lanes(self, m, meta, lut):
        """Route element m (pattern order) of the answer to its physical column (D-14 load order), as
        weights (codes, dtype, MX scale) or tags, onto the array's buses."""
        C, PK = self.cols, self.pack
        resp, scales = self.st.resp.data, self.sc.resp.data
        slots = [Shape.cast(f.shape).width for _, f in code_layout(PK)]
        code_w = sum(slots) + 11                    # the codes, then the MX scale (10 bits + NaN)
        lanes, tag_lanes = [], []
        ident_code = HArray(resp[i] for i in range(IDENTITY_CODES))[meta.row[:4]]
        for mcol in range(C):
            word = resp[mcol]
            plain = Mux(meta.tagw, word[:16], Mux(meta.lut, lut.entry[mcol], word))
            slot0 = Mux(meta.ident, Mux(meta.row[:4] == mcol % IDENTITY_CODES, ident_code, 0), plain)
            # slot j: element j of the lane (double row, MX); one element per PE: slot 0 as above
            codes = [by_pack(meta.pack, PK, mcol, j, resp, slot0 if j == 0 else 0) for j in range(PK)]
            # LdTags: four 4-bit tags per u16 word, the LSB nibble the larger logical column; TAG_WEIGHT: bits 16-19
            nib = resp[mcol // 4].bit_select(4 * (3 - mcol % 4), 4)
            tag_lanes.append(wire(m, Mux(meta.tags, nib | meta.force, word[16:20]), f"tag_lane{mcol}"))
            exp, nan = e8m0_scale(scales[mcol])
            scale = wire(m, exp, f"wl_scale{mcol}", signed(10))
            lanes.append(wire(m, Cat(*[c[:w] for c, w in zip(codes, slots)],
                                     Mux(meta.mx & meta.sc_valid, Cat(scale, nan), 0)), f"wl_lane{mcol}"))
        shift_r = wire(m, C - meta.col0 - meta.cols, "wl_shift_r", range(C + 1))

        def place(name, lanes, width):              # last column first (lcf) or first column first
            return Mux(meta.lcf, lane_shift(m, f"{name}_rev", Cat(*reversed(lanes)), shift_r, width, C, right=True),
                       lane_shift(m, f"{name}_fwd", Cat(*lanes), meta.col0, width, C))
        placed = wire(m, place("wl", lanes, code_w), "wl_placed", C * code_w)
        tags_placed = wire(m, place("tag", tag_lanes, 4), "tag_placed", C * 4)
        mask = span(m, "wl_mask", meta.col0, meta.cols, C)
        wl, tag = self.wl, self.tag
        m.d.comb += [wl.valid.eq(meta.valid & ~meta.tags), wl.row.eq(meta.row), wl.cols.eq(mask),
                     tag.valid.eq(meta.valid & (meta.tags | meta.tagw)), tag.row.eq(meta.row), tag.cols.eq(mask)]
        # each bus driven by one statement (wires.record)
        dtype = wire(m, Mux(meta.lut, lut.table_dtype, meta.dtype), "wl_dtype")
        lane = [placed[c * code_w:(c + 1) * code_w] for c in range(C)]
        m.d.comb += [wl.data.eq(Cat(*(record(weight_layout(PK), code=x[:code_w - 11], dtype=dtype,
                                                  scale=x[code_w - 11:-1], scale_nan=x[-1]) for x in lane))),
                     tag.data.eq(tags_placed)]


def mx_pattern(cur):
    """The stationary gather's TENSOR3D steps and counts, in element indices of the data pattern, that
    return lane m's element j at position m * pack + j for each MX element order (D-T25): normal
    (index m * pack + j), interleaved (j * cols + m: a tiled order of one tile of t = cols), tiled by
    t = min(32, cols) ((m div t) * t * pack + j * t + m mod t)."""
    ncol, pk, order = cur.cols, cur.pack, cur.mxmode
    packed, tiled = order == MxOrder.PACKED, order == MxOrder.TILED
    t = Mux(tiled, tile(ncol), ncol)
    tiles = Mux(tiled, (ncol + MX_TILE - 1) >> (MX_TILE.bit_length() - 1), 1)     # MX_TILE: a power of two
    return [Mux(packed, 1, t), Mux(packed, pk, 1), t * pk], [pk, Mux(packed, ncol, t), tiles]


class LutTable(wiring.Component):
    """The ConvLutLoad table (D-T15): 256 32-bit entries, entries 0..count-1 written in one cycle
    (`load`), read by `readers` combinational ports (`index` -> `entry`); a memory (one read port
    each, not a 256-way mux each) with a valid bit per entry so that a reset clears it (D-T41 (4))."""

    def __init__(self, readers: int):
        self.readers = readers
        self.module_name = f"tensore_lut_table_r{readers}"
        super().__init__({"load": In(1), "count": In(9), "dtype": In(8),
                          "entries": In(Bus(32, LUT_ENTRIES)),
                          "index": In(Bus(8, readers)), "entry": Out(Bus(32, readers)),
                          "table_dtype": Out(8)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(shape=32, depth=LUT_ENTRIES, init=[])
        valid = Signal(LUT_ENTRIES)
        dtype = Signal(8, init=Dtype.BFLOAT16)
        fill = span(m, "lut_fill", Const(0, 1), self.count, LUT_ENTRIES)
        with m.If(self.load):
            m.d.sync += [dtype.eq(self.dtype), valid.eq(valid | fill)]
        for i in range(LUT_ENTRIES):
            wp = mem.write_port()
            m.d.comb += [wp.addr.eq(i), wp.data.eq(self.entries[i]), wp.en.eq(self.load & fill[i])]
        entries = []
        for i in range(self.readers):
            rp = mem.read_port(domain="comb")
            m.d.comb += rp.addr.eq(self.index[i])
            entries.append(Mux(valid.bit_select(self.index[i], 1), rp.data, 0))
        m.d.comb += self.entry.eq(Cat(*entries))          # one statement for the whole bus
        m.d.comb += self.table_dtype.eq(dtype)
        return m


def lane_shift(m, name, value, amount, lane_w, lanes, *, right=False):
    """`value` (lanes x lane_w bits) shifted by `amount` whole lanes, as log2(lanes) stages of
    constant shifts: one variable shift by amount * lane_w bits would be a (lanes * lane_w)^2 netlist.
    Each stage is a signal: a stage reads the one before twice, and Amaranth copies an expression
    into every reader (so expressions would make the netlist lanes times larger, D-T42)."""
    width = lanes * lane_w
    x = wire(m, value[:width], f"{name}_in")
    for b in range(len(amount)):
        k = (1 << b) * lane_w
        if k >= width:
            return Mux(amount[b:] != 0, 0, x)
        x = wire(m, Mux(amount[b], x[k:] if right else Cat(Const(0, k), x[:width - k]), x), f"{name}_s{b}", width)
    return x


def by_pack(pack, PK, lane, j, resp, default):
    """Element j of weight lane `lane` (answer element lane * p + j) for the micro-op's elements per
    PE p in 2, 4, 8 (up to the engine's PK), else `default`."""
    out = default
    for p in (2, 4, 8):
        if p <= PK:
            out = Mux(pack == p, resp[p * lane + j] if j < p else 0, out)
    return out
