"""The array's rows of row ports (rtl/rowport.py, D-T42 (1)): the request chain from the launch unit
down the rows, each row's moving SBUF request and moving value, and the write records down beside
the sums to the write-back unit.

A LUT operand (scalar_mode LUT, D-T15) leaves its row port as table indices in its code slots (slot 0;
a MatmulSparse vector's fmaps in slots 0-3); here each is replaced by the table's entry (the load
unit's table, read through `lut_index` / `lut_entry`, MV_ELEMS readers per row), outside the row
port, so no combinational path leaves a row port and comes back into it.

A transpose of more elements than rows R (D-T40 (1)): row r's answer for vector v holds elements
r + j*R too, in the cycle vector v enters row r (t_data + v + r); element c = r + j*R must be at
the top of column c in t_data + v + c, so it waits j*R cycles in a delay line here (`top_psum`),
and rides the sum registers of column c down to its PSUM write."""
from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tensore.rtl.blackbox import black_box, prototype
from tensore.rtl.interfaces import arrays, request_port, scatter
from tensore.rtl.pe import act_layout, slot
from tensore.rtl.rowport import MV_ELEMS, MV_REQUEST, REC_LAYOUT, WREC_LAYOUT, RowPort, xit_layout, xpose_rounds


# the write record leaving the bottom row, and whether it is its micro-op's first vector (the write
# side tells a c256 micro-op's own two writes of a partition from two micro-ops', D-T40 (6))
DOWN_LAYOUT = data.StructLayout({"rec": WREC_LAYOUT, "first": 1})


def moving_port(rows: int) -> wiring.Signature:
    """The moving SBUF port: one MV_REQUEST per row, field-major (`req.valid[r]`, `req.part[r]`, ...),
    and each row's answer (`MV_ELEMS` 32-bit words) `L - 1` cycles later."""
    return request_port(arrays(MV_REQUEST, rows), data.ArrayLayout(32 * MV_ELEMS, rows))


class Rows(wiring.Component):
    """`rec` / `xit`: row 0's launch record and transpose iterator; `req_shift` / `advance`: the rhythm.
    Out: the moving requests (`mv`), the rows' moving values (`row_in`, to the array), the write
    record leaving the bottom row (`down`), a transpose's elements for the tops of the columns
    beyond the rows (`top_psum` / `top_valid`, an array of `cols` columns)."""

    def __init__(self, gen, rows: int, pack: int, sbuf_latency: int, *, cols: int = 0, black_box: bool = False):
        self.gen, self.rows, self.pack, self.L, self.black_box = gen, rows, pack, sbuf_latency, black_box
        self.cols, self.rounds = cols, xpose_rounds(rows, cols) if cols else 1
        super().__init__({
            "rec": In(REC_LAYOUT), "xit": In(xit_layout(self.rounds)), "req_shift": In(1), "advance": In(1),
            "mv": Out(moving_port(rows)),
            "row_in": Out(data.ArrayLayout(act_layout(pack), rows)),
            "lut_index": Out(data.ArrayLayout(8, rows * MV_ELEMS)),
            "lut_entry": In(data.ArrayLayout(32, rows * MV_ELEMS)),
            "lut_dtype": In(8),
            "down": Out(DOWN_LAYOUT),
            "top_psum": Out(data.ArrayLayout(32, max(cols, 1))), "top_valid": Out(max(cols, 1)),
        })

    def _port(self):
        return RowPort(self.gen, self.pack, self.L, rows=self.rows, rounds=self.rounds)

    def blocks(self) -> list:
        """The separately exported block it instantiates."""
        return [prototype(self._port())]

    def elaborate(self, platform):
        m = Module()
        ports = [black_box(self._port(), self.black_box) for _ in range(self.rows)]
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
            m.d.comb += [a.eq(mine), a.dtype.eq(Mux(rp.lut_dtype_sel, self.lut_dtype, mine.dtype))]
            for j in range(MV_ELEMS):
                code, k = slot(mine.code, j), r * MV_ELEMS + j
                m.d.comb += [self.lut_index[k].eq(code[:8]),
                             slot(a.code, j).eq(Mux(rp.lut_code, self.lut_entry[k], code))]
        scatter(m, [rp.mv_req for rp in ports], self.mv.req)
        m.d.comb += self.down.rec.eq(ports[-1].down_out)
        self._first_marks(m, ports)
        self._tops(m, ports)
        return m

    def _first_marks(self, m, ports):
        """Beside each row's write record (loaded in an advance): whether it is its micro-op's first
        vector (row 0's moving value `swap`, set for a non-transposing matmul's vector 0)."""
        marks = [Signal(name=f"first_mark{r}") for r in range(self.rows)]
        with m.If(self.advance):
            m.d.sync += [marks[0].eq(ports[0].row_in.swap)] + [marks[r].eq(marks[r - 1]) for r in range(1, self.rows)]
        m.d.comb += self.down.first.eq(marks[-1] & ports[-1].down_out.valid)

    def _tops(self, m, ports):
        """Element r + j*R of row r's answer into the top of column r + j*R, j*R cycles later."""
        R = self.rows
        for r, rp in enumerate(ports):
            for j in range(1, self.rounds):
                c = r + j * R
                if c >= self.cols:
                    continue
                line = [Signal(33, name=f"xtop{c}_{k}") for k in range(j * R)]
                with m.If(self.advance):
                    m.d.sync += [line[0].eq(Mux(rp.xfeed_valid[j], Cat(rp.xfeed[j], 1), 0))]
                    m.d.sync += [line[k].eq(line[k - 1]) for k in range(1, len(line))]
                m.d.comb += [self.top_psum[c].eq(line[-1][:32]), self.top_valid[c].eq(line[-1][32])]
