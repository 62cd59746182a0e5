"""One array row's share of the matmul unit (docs/timing.md; rtl/top.py): the row's stage of the
request chain, its moving SBUF request, the response's arrival Lm = L - 1 cycles later, the moving
value it sends into the row, and the row's stage of the write records that run down beside the sums.

Stage r of the request chain holds the record row r requests with; the chain moves one stage per
request rhythm (`req_shift`), so row r requests P*r cycles after row 0.  Beside it runs a transpose's
element iterator: row r requests element r of partition v (D-13), one TENSOR3D step per stage.
Every row is the same module, its row number an input (`index`), so the exported Verilog holds one
definition instantiated rows times (rtl/export.py).  The ConvLutLoad table stays in the top: a LUT
operand leaves here as the UINT8 index in code slot 0 with `lut_code` set, and the top replaces it."""
from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tensore.model.dtypes import Gen
from tensore.model.isa.enums import SeedMode
from tensore.rtl.blackbox import instance_of
from tensore.rtl.pe import SPARSE_FMAPS, act_layout

MV_ELEMS = SPARSE_FMAPS         # elements per moving request: the fmaps of a MatmulSparse vector

# what a vector carries from its launch to its PSUM write
REC_LAYOUT = data.StructLayout({
    "valid": 1, "swap": 1, "row0": 8, "rows": 8, "col0": 9, "cols": 9, "dtype": 8, "fp32_mode": 2,
    "multi": 1, "part": 7, "off0": 18, "off1": 18, "esize": 3,
    "dst_part": 7, "dst_off": 14, "dst_slot1": 14, "out_bf16": 1, "accumulate": 1, "zero": 1,
    "zero_log2": 2, "c256": 1, "fresh": 1, "fmaps": 3, "fstride": signed(20), "lut": 1, "xpose": 1,
    "seed": 2, "vidx": 5,
    "mx": 1, "pack": 4, "maddr": 19, "mstride": signed(20), "nib": 1, "scv": 1, "spart": 7, "soff": 18})
# the part of it the write side needs, from the array's top row to the PSUM write
WREC_FIELDS = ("valid", "col0", "cols", "c256", "dst_part", "dst_off", "dst_slot1", "out_bf16", "accumulate",
               "zero", "zero_log2", "xpose", "seed", "vidx")
WREC_LAYOUT = data.StructLayout({f: REC_LAYOUT[f].shape for f in WREC_FIELDS})
XIT_LAYOUT = data.StructLayout({"base": 18, "i": data.ArrayLayout(16, 3), "o": data.ArrayLayout(18, 3),
                                "num": data.ArrayLayout(16, 3), "step": data.ArrayLayout(signed(16), 3),
                                "esize": 3})


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


def _signature(pack: int) -> dict:
    return {
        "index": In(8), "req_shift": In(1), "advance": In(1),
        "req_in": In(REC_LAYOUT), "req_out": Out(REC_LAYOUT),
        "xit_in": In(XIT_LAYOUT), "xit_out": Out(XIT_LAYOUT),
        "down_in": In(WREC_LAYOUT), "down_out": Out(WREC_LAYOUT),
        "mv_req_valid": Out(1), "mv_req_part": Out(7),
        **{f"mv_req_off{j}": Out(18) for j in range(MV_ELEMS)},
        "mv_req_esize": Out(3), "mv_req_mx": Out(1), "mv_req_addr": Out(19), "mv_req_stride": Out(signed(20)),
        "mv_req_count": Out(4), "mv_req_nib": Out(1), "mv_req_spart": Out(7), "mv_req_soff": Out(18),
        "mv_resp": In(32 * MV_ELEMS),
        "row_in": Out(act_layout(pack)),
        "lut_code": Out(1), "lut_dtype_sel": Out(1),    # slot 0 is a LUT index / the dtype is the LUT's
    }


def rowport_module_name(gen, pack: int, sbuf_latency: int) -> str:
    return f"tensore_rowport_{Gen.parse(gen).name.lower()}_p{pack}_l{sbuf_latency}"


class RowPort(wiring.Component):
    """Row `index`: the request stage (`req_in` is the stage above, or the launch record for row 0),
    the moving request, the response Lm cycles later, the row's moving value, and the write-record
    stage (`down_in`: the row above's; row 0 takes its own record, as it enters the array)."""

    def __init__(self, gen, pack: int, sbuf_latency: int):
        self.gen, self.pack, self.L = Gen.parse(gen), pack, sbuf_latency
        super().__init__(_signature(pack))

    def elaborate(self, platform):
        m = Module()
        r, PK, Lm = self.index, self.pack, self.L - 1
        maverick = self.gen.layout == Gen.MAVERICK
        rec, x = Signal(REC_LAYOUT, name="req"), Signal(XIT_LAYOUT, name="xit")
        # a transpose's iterator: row 0 starts at element 0 of the launch, row r steps row r-1's
        xi = self.xit_in
        ni, no = pattern_step([xi.i[d] for d in range(3)], [xi.o[d] for d in range(3)],
                              [xi.num[d] for d in range(3)], [xi.step[d] for d in range(3)], xi.esize)
        with m.If(self.req_shift):
            m.d.sync += [rec.eq(self.req_in), rec.fresh.eq(self.req_in.valid),
                         x.base.eq(xi.base), x.esize.eq(xi.esize), x.num.eq(xi.num), x.step.eq(xi.step)]
            m.d.sync += [x.i[d].eq(Mux(r == 0, xi.i[d], ni[d])) for d in range(3)]
            m.d.sync += [x.o[d].eq(Mux(r == 0, xi.o[d], no[d])) for d in range(3)]
        with m.Else():
            m.d.sync += rec.fresh.eq(0)
        m.d.comb += [self.req_out.eq(rec), self.xit_out.eq(x)]

        in_block = rec.valid & (r >= rec.row0) & (r < rec.row0 + rec.rows)
        sparse = rec.fmaps != 0         # fmap f of the vector at off0 + f * step_elem[3] * esize
        needs = (rec.seed == 0) | Const(int(not maverick), 1) & (rec.seed == SeedMode.LOAD_SEED)
        m.d.comb += [self.mv_req_valid.eq(in_block & rec.fresh & needs),
                     self.mv_req_part.eq(Mux(rec.xpose, rec.part, rec.part + (r - rec.row0))),
                     self.mv_req_off0.eq(Mux(rec.xpose, x.base + x.o[0] + x.o[1] + x.o[2], rec.off0)),
                     self.mv_req_off1.eq(Mux(sparse, rec.off0 + rec.fstride, rec.off1)),
                     self.mv_req_off2.eq(rec.off0 + 2 * rec.fstride),
                     self.mv_req_off3.eq(rec.off0 + 3 * rec.fstride),
                     self.mv_req_esize.eq(rec.esize),
                     self.mv_req_mx.eq(rec.mx), self.mv_req_addr.eq(rec.maddr),
                     self.mv_req_stride.eq(rec.mstride), self.mv_req_count.eq(rec.pack),
                     self.mv_req_nib.eq(rec.nib),
                     self.mv_req_spart.eq(rec.spart + ((r - rec.row0) & Mux(rec.pack == 8, ~3, ~7))),
                     self.mv_req_soff.eq(Mux(rec.scv, rec.soff, 0))]

        # the array side: the same record Lm cycles later, with the data
        d = [rec] + [Signal(REC_LAYOUT, name=f"act{i}") for i in range(Lm)]
        for i in range(1, Lm + 1):
            m.d.sync += d[i].eq(d[i - 1])
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
                     a.code.s0.eq(Mux(act.mx, word[:8], word[:32])),
                     self.lut_code.eq(act.lut & ~act.mx), self.lut_dtype_sel.eq(act.lut)]
        # MX: the codes in bytes 0-7, the block scale in byte 8 (E8M0: value - 127, 0xFF NaN)
        sbyte = word[64:72]
        m.d.comb += [a.scaled.eq(act.mx), a.sa.eq(Mux(act.scv, sbyte - 127, 0)),
                     a.sa_nan.eq(act.scv & (sbyte == 0xFF))]
        for j in range(1, max(PK, MV_ELEMS)):
            other = word[32 * j:32 * j + 16] if j < MV_ELEMS else 0
            m.d.comb += getattr(a.code, f"s{j}").eq(Mux(act.mx, word[8 * j:8 * j + 8], other))

        # the write record, one row down per array stage
        down = Signal(WREC_LAYOUT, name="down")
        with m.If(self.advance):
            m.d.sync += down.eq(Mux(r == 0, narrow(act), self.down_in.as_value()))
        m.d.comb += self.down_out.eq(down)
        return m


def narrow(rec):
    """The write-side fields of a REC_LAYOUT record, as the bits of a WREC_LAYOUT value."""
    return Cat(*(getattr(rec, f) for f in WREC_FIELDS))


class RowPortBlackBox(RowPort):
    """An instance of the exported row-port module (`rowport_module_name`)."""

    def elaborate(self, platform):
        m = Module()
        m.submodules.rowport = instance_of(self, rowport_module_name(self.gen, self.pack, self.L))
        return m
