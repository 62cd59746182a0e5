"""One array row's share of the matmul path (docs/timing.md; rtl/rows.py): the row's stage of the
request chain, its moving SBUF request, the response's arrival Lm = L - 1 cycles later, the moving
value it sends into the row, and the row's stage of the write records that run down beside the sums.

Stage r of the request chain holds the record row r requests with; the chain moves one stage per
request rhythm (`req_shift`), so row r requests P*r cycles after row 0.  Beside it runs a transpose's
element iterator: row r requests element r of partition v (D-13), one TENSOR3D step per stage.  On
an array of fewer rows R than a transpose's elements (D-T40 (1)) the same request fetches elements
r + j*R too (j < `rounds`, `xpose_rounds`), each from an iterator of its own, and hands them to
rtl/rows.py (`xfeed`), which delays them j*R cycles into the top of column r + j*R.
Every row is the same module, its row number an input (`index`), so the exported Verilog holds one
definition instantiated rows times (rtl/export.py).  The ConvLutLoad table is the load unit's: LUT
operands leave here as UINT8 indices in the code slots with `lut_code` set, and rtl/rows.py replaces
them.  The TENSOR3D iterator (`pattern_step`, `PatternIter`) is here too; the launch unit uses it."""
from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tensore.model.addrmap import PARTITION_BITS, PARTITIONS, PSUM_OFFSET_BITS, SBUF_OFFSET_BITS
from tensore.model.dtypes import Gen
from tensore.model.isa.enums import SeedMode
from tensore.model.timing import tile_stream
from tensore.rtl.fp.raw import e8m0_scale
from tensore.rtl.mx import MAP_FIELDS, block_first_row
from tensore.rtl.pe import SPARSE_FMAPS, act_layout, slot, slot_width
from tensore.rtl.wires import wire

MV_ELEMS = SPARSE_FMAPS         # elements per moving request: the fmaps of a MatmulSparse vector

PART, SOFF, POFF = PARTITION_BITS, SBUF_OFFSET_BITS, PSUM_OFFSET_BITS     # address fields (D-19)
# what a vector carries from its launch to its PSUM write
REC_LAYOUT = data.StructLayout({
    "valid": 1, "swap": 1, "row0": 8, "rows": 8, "col0": 9, "cols": 9, "dtype": 8, "fp32_mode": 2,
    "multi": 1, "part": PART, "off0": SOFF, "off1": SOFF, "esize": 3,
    "dst_part": PART, "dst_off": POFF, "dst_slot1": POFF, "out_bf16": 1, "accumulate": 1, "zero": 1,
    "zero_log2": 2, "c256": 1, "fresh": 1, "fmaps": 3, "fstride": signed(20), "lut": 1, "xpose": 1,
    "seed": 2, "vidx": 5,
    "mx": 1, "pack": 4, "maddr": SOFF + 1, "melem": 16, "mstride": signed(20), **MAP_FIELDS, "nib": 1, "scv": 1,
    "spart": PART, "soff": SOFF})
# the part of it the write side needs, from the array's top row to the PSUM write
WREC_FIELDS = ("valid", "col0", "cols", "c256", "dst_part", "dst_off", "dst_slot1", "out_bf16", "accumulate",
               "zero", "zero_log2", "xpose", "seed", "vidx")
WREC_LAYOUT = data.StructLayout({f: REC_LAYOUT[f].shape for f in WREC_FIELDS})


def xpose_rounds(rows: int, cols: int) -> int:
    """Elements per row of a transpose on a rows x cols array: a transpose moves up to min(cols, 128)
    elements (one per column and PSUM partition), row r those of index r + j * rows; at most MV_ELEMS
    (the words of one moving request; a longer transpose is `unsupported`)."""
    return max(1, min(MV_ELEMS, -(-min(cols, PARTITIONS) // rows)))


def xit_layout(rounds: int = 1) -> data.StructLayout:
    """A transpose's element iterator state: element r's (i, o) and, with more rounds, element
    r + j * R's (`xi`, `xo`, j = 1 .. rounds - 1); o in bytes, or nibbles for 4-bit elements (`nib`
    records), from the byte offset `base`."""
    more = {"xi": data.ArrayLayout(data.ArrayLayout(16, 3), rounds - 1),
            "xo": data.ArrayLayout(data.ArrayLayout(SOFF + 1, 3), rounds - 1)} if rounds > 1 else {}
    return data.StructLayout({"base": SOFF, "i": data.ArrayLayout(16, 3), "o": data.ArrayLayout(SOFF + 1, 3),
                              "num": data.ArrayLayout(16, 3), "step": data.ArrayLayout(signed(16), 3),
                              "esize": 3, **more})


XIT_LAYOUT = xit_layout()
# One row's moving SBUF request (D-T38 (5), D-T40 (3), (5)): partition and byte offsets of its one
# to four elements, or with `mx` `count` codes of a data pattern starting at address `addr` (bytes,
# nibbles with `nib`): indices elem + j * stride, each at addr + its mapped address (rtl/mx.py
# MAP_FIELDS), and the scale byte at (spart, soff).  The answer: `MV_ELEMS` 32-bit words.
MV_REQUEST = data.StructLayout({
    "valid": 1, "part": PART, **{f"off{j}": SOFF for j in range(MV_ELEMS)}, "esize": 3,
    "mx": 1, "addr": SOFF + 1, "elem": 16, "stride": signed(20), "count": 4, "nib": 1, **MAP_FIELDS,
    "spart": PART, "soff": SOFF})


def pattern_step(i, o, num, step, esize):
    """One step of a TENSOR3D element iterator: (i[3], o[3]) -> next, o = per-dim byte offsets."""
    carry = Const(1, 1)
    outs_i, outs_o = [], []
    for d in range(3):
        last = i[d] + 1 >= num[d]
        outs_i.append(Mux(carry, Mux(last, 0, i[d] + 1), i[d]))
        outs_o.append(Mux(carry, Mux(last, 0, o[d] + step[d] * esize), o[d]))
        carry = carry & last
    return outs_i, outs_o


class PatternIter:
    """A TENSOR3D element iterator in registers (i[3], o[3] byte offsets, base) for the load and launch
    units: `go` restarts it at `start`; `offset(o)` is an element's offset, `step(i, o)` the next
    element's (i, o), `commit` keeps one."""

    def __init__(self, m, name, go, start, num, step, esize, width):
        self.m, self.num, self.stride, self.esize, self.width = m, num, step, esize, width
        self.regs_i = [Signal(16, name=f"{name}_ri{d}") for d in range(3)]
        self.regs_o = [Signal(signed(34), name=f"{name}_ro{d}") for d in range(3)]
        self.reg_base = Signal(SOFF, name=f"{name}_rbase")
        self.i = [wire(m, Mux(go, 0, x), f"{name}_i{d}") for d, x in enumerate(self.regs_i)]
        self.o = [wire(m, Mux(go, 0, x), f"{name}_o{d}") for d, x in enumerate(self.regs_o)]
        self.base = wire(m, Mux(go, start, self.reg_base), f"{name}_base")

    def offset(self, o):
        return (self.base + o[0] + o[1] + o[2])[:self.width]

    def step(self, i, o):
        return pattern_step(i, o, [self.num[d] for d in range(3)], [self.stride[d] for d in range(3)], self.esize)

    def commit(self, cond, i, o):
        with self.m.If(cond):
            self.m.d.sync += [self.reg_base.eq(self.base)] + [self.regs_i[d].eq(i[d]) for d in range(3)] + \
                [self.regs_o[d].eq(o[d]) for d in range(3)]


class RowPort(wiring.Component):
    """Row `index`: the request stage (`req_in` is the stage above, or the launch record for row 0),
    the moving request, the response Lm cycles later, the row's moving value, and the write-record
    stage (`down_in`: the row above's; row 0 takes its own record, as it enters the array)."""

    repeated = True            # instantiated many times: a Verilator hierarchical block (rtl/export.py)

    def __init__(self, gen, pack: int, sbuf_latency: int, *, rows: int = 0, rounds: int = 1, sparse32: bool = False,
                 tile: int = 0):
        """`rows` R and `rounds` (xpose_rounds): a transpose's elements r + j * R, j < rounds, leave
        on `xfeed` (bit j of `xfeed_valid`: element r + j * R of this row's vector, j >= 1).
        `sparse32`: code slots 1-3 take whole 32-bit words (D-T40 (3)).  `tile`: row tiles of `tile`
        rows side by side (D-T100): a record enters the write stage at its first row (row0: a
        tile's first, a transpose's 0) and `down_tap` marks the stage of its last row (the tap below
        its whole tiles, a transpose's the array's bottom)."""
        self.gen, self.pack, self.L, self.R, self.rounds = Gen.parse(gen), pack, sbuf_latency, rows, rounds
        self.sparse32, self.tile = sparse32, tile
        feed = {"xfeed_valid": Out(MV_ELEMS), "xfeed": Out(data.ArrayLayout(32, MV_ELEMS))} if rounds > 1 else {}
        feed |= {"down_tap": Out(1)} if tile else {}
        super().__init__({
            "index": In(8), "req_shift": In(1), "advance": In(1),
            "req_in": In(REC_LAYOUT), "req_out": Out(REC_LAYOUT),
            "xit_in": In(xit_layout(rounds)), "xit_out": Out(xit_layout(rounds)),
            "down_in": In(WREC_LAYOUT), "down_out": Out(WREC_LAYOUT),
            "mv_req": Out(MV_REQUEST), "mv_resp": In(32 * MV_ELEMS),
            "row_in": Out(act_layout(pack, sparse32)),
            "lut_code": Out(1), "lut_dtype_sel": Out(1),    # slot 0 is a LUT index / the dtype is the LUT's
            **feed,
        })

    @property
    def module_name(self) -> str:
        rounds = f"_x{self.rounds}r{self.R}" if self.rounds > 1 else ""
        s32 = "_s32" if self.sparse32 else ""
        tiles = f"_r{self.R}t{self.tile}" if self.tile else ""
        return f"tensore_rowport_{self.gen.name.lower()}_p{self.pack}_l{self.L}{rounds}{s32}{tiles}"

    def elaborate(self, platform):
        m = Module()
        r, PK, Lm = self.index, self.pack, self.L - 1
        maverick = self.gen.layout == Gen.MAVERICK
        rec = Signal(REC_LAYOUT, name="req")
        with m.If(self.req_shift):
            m.d.sync += [rec.eq(self.req_in), rec.fresh.eq(self.req_in.valid)]
        with m.Else():
            m.d.sync += rec.fresh.eq(0)
        m.d.comb += self.req_out.eq(rec)
        xoffs, xpar = self._xpose_elements(m, rec)

        in_block = rec.valid & (r >= rec.row0) & (r < rec.row0 + rec.rows)
        sparse = rec.fmaps != 0         # fmap f of the vector at off0 + f * step_elem[3] * esize
        needs = needs_data(rec, maverick)
        q = self.mv_req
        m.d.comb += [q.valid.eq(in_block & rec.fresh & needs),
                     q.part.eq(Mux(rec.xpose, rec.part, rec.part + (r - rec.row0))),
                     q.off0.eq(Mux(rec.xpose, xoffs[0], rec.off0)),
                     q.off1.eq(Mux(sparse, rec.off0 + rec.fstride, rec.off1)),
                     q.off2.eq(rec.off0 + 2 * rec.fstride),
                     q.off3.eq(rec.off0 + 3 * rec.fstride),
                     q.esize.eq(rec.esize),
                     q.mx.eq(rec.mx), q.addr.eq(rec.maddr), q.elem.eq(rec.melem),
                     q.stride.eq(rec.mstride), q.count.eq(rec.pack), *[q[f].eq(rec[f]) for f in MAP_FIELDS],
                     q.nib.eq(rec.nib),
                     q.spart.eq(rec.spart + block_first_row(r - rec.row0, rec.pack)),
                     q.soff.eq(Mux(rec.scv, rec.soff, 0))]
        for j in range(1, self.rounds):         # a transpose's elements r + j * R
            with m.If(rec.xpose):
                m.d.comb += getattr(q, f"off{j}").eq(xoffs[j])

        # the array side: the same record Lm cycles later, with the data
        d = [rec] + [Signal(REC_LAYOUT, name=f"act{i}") for i in range(Lm)]
        par = [xpar] + [Signal(self.rounds, name=f"act_xpar{i}") for i in range(Lm)]
        for i in range(1, Lm + 1):
            m.d.sync += [d[i].eq(d[i - 1]), par[i].eq(par[i - 1])]
        act = d[Lm]
        held = Signal(32 * MV_ELEMS, name="mv_hold")
        word = Signal(32 * MV_ELEMS, name="mv_word")
        m.d.comb += word.eq(Mux(act.fresh, self.mv_resp, held))
        m.d.sync += held.eq(word)
        a = self.row_in
        m.d.comb += [a.valid.eq(act.valid & (r >= act.row0) & (r < act.row0 + act.rows)), a.swap.eq(act.swap),
                     a.first.eq(r == act.row0),
                     a.col_lo.eq(Mux(act.xpose, r, act.col0)),
                     a.col_hi.eq(Mux(act.xpose, r + 1, act.col0 + act.cols)),
                     a.xpose.eq(act.xpose), a.dtype.eq(act.dtype),
                     a.fp32_mode.eq(act.fp32_mode), a.multi.eq(act.multi), a.fmaps.eq(act.fmaps),
                     a.lanes.eq(Mux(act.pack == 8, 3, Mux(act.pack == 4, 2, Mux(act.pack == 2, 1, 0)))),
                     a.code.s0.eq(Mux(act.mx, word[:8], _code(act, word, par[Lm], 0))),
                     self.lut_code.eq(act.lut & ~act.mx), self.lut_dtype_sel.eq(act.lut)]
        # MX: the codes in bytes 0-7, the block scale in byte 8
        sa, sa_nan = e8m0_scale(word[64:72])
        m.d.comb += [a.scaled.eq(act.mx), a.sa.eq(Mux(act.scv, sa, 0)), a.sa_nan.eq(act.scv & sa_nan)]
        for j in range(1, max(PK, MV_ELEMS)):
            other = word[32 * j:32 * j + slot_width(j, self.sparse32)] if j < MV_ELEMS else 0
            m.d.comb += slot(a.code, j).eq(Mux(act.mx, word[8 * j:8 * j + 8], other))

        if self.rounds > 1:             # elements r + j * R, for the tops of their columns (rtl/rows.py)
            feed = act.valid & act.fresh & act.xpose & needs_data(act, maverick)
            m.d.comb += [self.xfeed_valid[j].eq(feed & (r + j * self.R < act.rows)) for j in range(1, self.rounds)]
            m.d.comb += [self.xfeed[j].eq(_code(act, word, par[Lm], j)) for j in range(1, self.rounds)]

        # the write record, one row down per array stage
        down = Signal(WREC_LAYOUT, name="down")
        own = (act.valid & (r == act.row0)) if self.tile else (r == 0)
        with m.If(self.advance):
            m.d.sync += down.eq(Mux(own, narrow(act), self.down_in.as_value()))
        m.d.comb += self.down_out.eq(down)
        if self.tile:           # this stage is the record's last row: its span's (the vector's own record is here)
            entry, span = tile_stream(act.row0, act.rows, act.xpose, self.R, self.tile, Mux)
            tap = Signal(name="down_tap_reg")
            with m.If(self.advance):
                m.d.sync += tap.eq(r == entry + span - 1)
            m.d.comb += self.down_tap.eq(tap)
        return m

    def _xpose_elements(self, m, rec):
        """A transpose's iterators (row 0 starts them at the launch's elements 0, R, 2R, ...; row r
        steps row r - 1's): the byte offsets of this row's elements r + j * R, and for 4-bit elements
        (`nib`) each one's nibble in its byte (bit j)."""
        r, rounds = self.index, self.rounds
        xi, x = self.xit_in, Signal(xit_layout(rounds), name="xit")
        its_in = [(xi.i, xi.o)] + [(xi.xi[j], xi.xo[j]) for j in range(rounds - 1)]
        its = [(x.i, x.o)] + [(x.xi[j], x.xo[j]) for j in range(rounds - 1)]
        with m.If(self.req_shift):
            m.d.sync += [x.base.eq(xi.base), x.esize.eq(xi.esize), x.num.eq(xi.num), x.step.eq(xi.step)]
            for (ii, oi), (io, oo) in zip(its_in, its):
                ni, no = pattern_step([ii[d] for d in range(3)], [oi[d] for d in range(3)],
                                      [xi.num[d] for d in range(3)], [xi.step[d] for d in range(3)], xi.esize)
                m.d.sync += [io[d].eq(Mux(r == 0, ii[d], ni[d])) for d in range(3)]
                m.d.sync += [oo[d].eq(Mux(r == 0, oi[d], no[d])) for d in range(3)]
        m.d.comb += self.xit_out.eq(x)
        offs, par = [], []
        for j, (_, o) in enumerate(its):
            tot = wire(m, (o[0] + o[1] + o[2])[:SOFF + 1], f"xit_rel{j}")
            offs.append(wire(m, x.base + Mux(rec.nib, tot[1:], tot[:SOFF]), f"xit_off{j}", SOFF))
            par.append(rec.nib & tot[0])
        return offs, Cat(*par)


def needs_data(rec, maverick: bool):
    """A record whose rows read moving data: not a seed move, except a CAYMAN / MARIANA LoadSeed."""
    return (rec.seed == 0) | Const(int(not maverick), 1) & (rec.seed == SeedMode.LOAD_SEED)


def _code(act, word, par, j):
    """Element j of a moving answer: word j, or for a transpose's 4-bit elements the nibble `par[j]`
    of its byte."""
    w = word[32 * j:32 * j + 32]
    return Mux(act.xpose & act.nib, w[:8].bit_select(par[j] * 4, 4), w)


def narrow(rec):
    """The write-side fields of a REC_LAYOUT record, as the bits of a WREC_LAYOUT value."""
    return Cat(*(rec[f] for f in WREC_FIELDS))

