"""The array's rows of row ports (rtl/rowport.py, D-T42 (1)): the request chain from the launch unit
down the rows, each row's moving SBUF request and moving value, and the write records down beside
the sums to the write-back unit.

A LUT operand (scalar_mode LUT, D-T15) leaves its row port as the table index in code slot 0; here
it is replaced by the table's entry (the load unit's table, read through `lut_index` / `lut_entry`),
outside the row port, so no combinational path leaves a row port and comes back into it."""
from amaranth.hdl import Module, Mux
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tensore.rtl.blackbox import black_box, prototype
from tensore.rtl.interfaces import arrays, request_port, scatter
from tensore.rtl.pe import act_layout
from tensore.rtl.rowport import MV_ELEMS, MV_REQUEST, REC_LAYOUT, WREC_LAYOUT, XIT_LAYOUT, RowPort


def moving_port(rows: int) -> wiring.Signature:
    """The moving SBUF port: one MV_REQUEST per row, field-major (`req.valid[r]`, `req.part[r]`, ...),
    and each row's answer (`MV_ELEMS` 32-bit words) `L - 1` cycles later."""
    return request_port(arrays(MV_REQUEST, rows), data.ArrayLayout(32 * MV_ELEMS, rows))


class Rows(wiring.Component):
    """`rec` / `xit`: row 0's launch record and transpose iterator; `req_shift` / `advance`: the rhythm.
    Out: the moving requests (`mv`), the rows' moving values (`row_in`, to the array), the write
    record leaving the bottom row (`down`)."""

    def __init__(self, gen, rows: int, pack: int, sbuf_latency: int, *, black_box: bool = False):
        self.gen, self.rows, self.pack, self.L, self.black_box = gen, rows, pack, sbuf_latency, black_box
        super().__init__({
            "rec": In(REC_LAYOUT), "xit": In(XIT_LAYOUT), "req_shift": In(1), "advance": In(1),
            "mv": Out(moving_port(rows)),
            "row_in": Out(data.ArrayLayout(act_layout(pack), rows)),
            "lut_index": Out(data.ArrayLayout(8, rows)), "lut_entry": In(data.ArrayLayout(32, rows)),
            "lut_dtype": In(8),
            "down": Out(WREC_LAYOUT),
        })

    def blocks(self) -> list:
        """The separately exported block it instantiates."""
        return [prototype(RowPort(self.gen, self.pack, self.L))]

    def elaborate(self, platform):
        m = Module()
        ports = [black_box(RowPort(self.gen, self.pack, self.L), self.black_box) for _ in range(self.rows)]
        for r, rp in enumerate(ports):
            m.submodules[f"rowport{r}"] = rp
            m.d.comb += [rp.index.eq(r), rp.req_shift.eq(self.req_shift), rp.advance.eq(self.advance),
                         rp.mv_resp.eq(self.mv.resp.data[r])]
            if r:
                above = ports[r - 1]
                m.d.comb += [rp.req_in.eq(above.req_out), rp.xit_in.eq(above.xit_out), rp.down_in.eq(above.down_out)]
            else:
                m.d.comb += [rp.req_in.eq(self.rec), rp.xit_in.eq(self.xit)]
            a, mine = self.row_in[r], rp.row_in
            m.d.comb += [self.lut_index[r].eq(mine.code.s0[:8]), a.eq(mine),
                         a.code.s0.eq(Mux(rp.lut_code, self.lut_entry[r], mine.code.s0)),
                         a.dtype.eq(Mux(rp.lut_dtype_sel, self.lut_dtype, mine.dtype))]
        scatter(m, [rp.mv_req for rp in ports], self.mv.req)
        m.d.comb += self.down.eq(ports[-1].down_out)
        return m
