"""The array's rows of row ports (rtl/rowport.py, D-T42 (1)): the request chain from the launch unit
down the rows, each row's moving SBUF request and moving value, and the write records down beside
the sums to the write-back unit.

A LUT operand (scalar_mode LUT, D-T15) leaves its row port as table indices in its code slots (slot 0;
a MatmulSparse vector's fmaps in slots 0-3); here each is replaced by the table's entry (the load
unit's table, read through `lut.index` / `lut.entry`, MV_ELEMS readers per row), outside the row
port, so no combinational path leaves a row port and comes back into it.

A transpose of more elements than rows R (D-T40 (1)): row r's answer for vector v holds elements
r + j*R too, in the cycle vector v enters row r (t_data + v + r); element c = r + j*R must be at
the top of column c in t_data + v + c, so it waits j*R cycles in a delay line here (`top_psum`),
and rides the sum registers of column c down to its PSUM write.

Rows is nearly pure wiring, and Amaranth builds a net per bit of every row port's ~1500 port bits, so
the exported Verilog is `verilog()` instead (D-T42 (2), as the PSUM write crossbar): the same
function as one module of row-port instances, its bit positions taken from the layouts; its Amaranth
form is what Amaranth's simulator runs, and tests/test_rtl_export.py checks the two against each other."""
from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.hdl._ast import Operator, Slice
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tensore.rtl.blackbox import black_box, prototype, ports as block_ports
from tensore.rtl.config import Config
from tensore.rtl.interfaces import Bus, arrays, request_port, scatter
from tensore.rtl.links import lut_link, row_feed
from tensore.rtl.pe import act_layout, slot
from tensore.rtl.rowport import MV_ELEMS, MV_REQUEST, WREC_LAYOUT, RowPort, xpose_rounds


# the write record leaving the bottom row, and whether it is its micro-op's first vector (the write
# side tells a c256 micro-op's own two writes of a partition from two micro-ops', D-T40 (6))
DOWN_LAYOUT = data.StructLayout({"rec": WREC_LAYOUT, "first": 1})


def moving_port(rows: int) -> wiring.Signature:
    """The moving SBUF port: one MV_REQUEST per row, field-major (`req.valid[r]`, `req.part[r]`, ...),
    and each row's answer (`MV_ELEMS` 32-bit words) `L - 1` cycles later."""
    return request_port(arrays(MV_REQUEST, rows), Bus(32 * MV_ELEMS, rows))


class Rows(wiring.Component):
    """`feed`: row 0's launch record and transpose iterator, and the chain's shift (rtl/links.py
    row_feed); `advance`: the array's rhythm.  Out: the moving requests (`mv`), the rows' moving values (`row_in`, to the array), the write
    record leaving the bottom row (`down`), a transpose's elements for the tops of the columns
    beyond the rows (`top_psum` / `top_valid`, an array of `cols` columns)."""

    def __init__(self, cfg: Config, *, black_box: bool = False):
        self.gen, self.rows, self.pack, self.L, self.black_box = cfg.generation, cfg.rows, cfg.pack, cfg.sbuf_latency, \
            black_box
        self.sparse32 = cfg.sparse32        # 32-bit code slots 1-3 (D-T40 (3))
        self.cols, self.rounds = cfg.cols, xpose_rounds(cfg.rows, cfg.cols)
        self.tile = cfg.tile if cfg.tile < cfg.rows else 0        # row tiles side by side (D-T100)
        self.taps = cfg.rows // cfg.tile
        rows, pack, sparse32, cols = self.rows, self.pack, self.sparse32, self.cols
        tiles = {**{f"feed{i}": In(row_feed(self.rounds)) for i in range(1, self.taps)},
                 **{f"down{k}": Out(DOWN_LAYOUT) for k in range(self.taps - 1)}}
        super().__init__({
            "feed": In(row_feed(self.rounds)), "advance": In(1), **tiles,
            "mv": Out(moving_port(rows)),
            "row_in": Out(Bus(act_layout(pack, sparse32), rows)),
            "lut": Out(lut_link(rows)),
            "down": Out(DOWN_LAYOUT),
            "top_psum": Out(Bus(32, max(cols, 1))), "top_valid": Out(max(cols, 1)),
        })

    @property
    def module_name(self) -> str:
        s32 = "_s32" if self.sparse32 else ""
        tiles = f"_t{self.tile}" if self.tile else ""
        return f"tensore_rowports_{self.gen.name.lower()}_r{self.rows}_p{self.pack}_l{self.L}_c{self.cols}{s32}{tiles}"

    def _port(self):
        return RowPort(self.gen, self.pack, self.L, rows=self.rows, rounds=self.rounds, sparse32=self.sparse32,
                       tile=self.tile)

    def blocks(self) -> list:
        """The separately exported block it instantiates."""
        return [prototype(self._port())]

    def elaborate(self, platform):
        m = Module()
        ports = [black_box(self._port(), self.black_box) for _ in range(self.rows)]
        for r, rp in enumerate(ports):
            m.submodules[f"rowport{r}"] = rp
            m.d.comb += [rp.index.eq(r), rp.req_shift.eq(self.feed.req_shift), rp.advance.eq(self.advance),
                         rp.mv_resp.eq(self.mv.resp.data[r])]
            if r and self.tile and r % self.tile == 0:      # a tile's entry: its launch unit's record, else above's
                above, feed = ports[r - 1], getattr(self, f"feed{r // self.tile}")
                m.d.comb += [rp.req_in.eq(Mux(feed.rec.valid, feed.rec.as_value(), above.req_out.as_value())),
                             rp.xit_in.eq(Mux(feed.rec.valid, feed.xit.as_value(), above.xit_out.as_value())),
                             rp.down_in.eq(Mux(above.down_tap, 0, above.down_out.as_value()))]
            elif r:
                above = ports[r - 1]
                m.d.comb += [rp.req_in.eq(above.req_out), rp.xit_in.eq(above.xit_out), rp.down_in.eq(above.down_out)]
            else:
                m.d.comb += [rp.req_in.eq(self.feed.rec), rp.xit_in.eq(self.feed.xit)]
            a, mine = self.row_in[r], rp.row_in
            m.d.comb += [a.eq(mine), a.dtype.eq(Mux(rp.lut_dtype_sel, self.lut.dtype, mine.dtype))]
            for j in range(MV_ELEMS):
                code, k = slot(mine.code, j), r * MV_ELEMS + j
                m.d.comb += [self.lut.index[k].eq(code[:8]),
                             slot(a.code, j).eq(Mux(rp.lut_code, self.lut.entry[k], code))]
        scatter(m, [rp.mv_req for rp in ports], self.mv.req)
        m.d.comb += self.down.rec.eq(ports[-1].down_out)
        self._first_marks(m, ports)
        self._tops(m, ports)
        return m

    def _first_marks(self, m, ports):
        """Beside each row's write record (loaded in an advance): whether it is its micro-op's first
        vector (row 0's moving value `swap`, set for a non-transposing matmul's vector 0; under row
        tiles a tile's first row's, where its record enters).  The records leave at the bottom
        (`down`) and at the taps below the tiles above it (`down0`, ...: those that end there)."""
        marks = [Signal(name=f"first_mark{r}") for r in range(self.rows)]
        entry = [r for r in range(1, self.rows) if self.tile and r % self.tile == 0]
        own = {r: ports[r].row_in.first & ports[r].row_in.valid for r in entry}
        with m.If(self.advance):
            m.d.sync += [marks[0].eq(ports[0].row_in.swap)]
            m.d.sync += [marks[r].eq(Mux(own[r], ports[r].row_in.swap, marks[r - 1]) if r in own else marks[r - 1])
                         for r in range(1, self.rows)]
        m.d.comb += self.down.first.eq(marks[-1] & ports[-1].down_out.valid)
        for k in range(self.taps - 1):
            last = ports[(k + 1) * self.tile - 1]
            tap = getattr(self, f"down{k}")
            m.d.comb += [tap.rec.eq(Mux(last.down_tap, last.down_out.as_value(), 0)),
                         tap.first.eq(marks[(k + 1) * self.tile - 1] & last.down_out.valid & last.down_tap)]

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

    def verilog(self) -> str:
        """The function as one Verilog module (ports as rtl/blackbox.py names them): the row ports as
        instances of their exported module, the chains, LUT substitution, first marks and delay lines."""
        me, proto = _Names(self), prototype(self._port())
        rp = _Names(proto)
        lines = [f"// {self.rows} row ports of {proto.module_name} (rtl/rows.py)",
                 f"module {self.module_name}({', '.join(['clk', 'rst', *me.ports])});", "  input clk, rst;"]
        lines += [f"  {'input' if flow == In else 'output'} [{len(v) - 1}:0] {n};" for n, (v, flow) in me.ports.items()]
        for r in range(self.rows):
            lines += self._row_verilog(r, me, proto, rp) + self._row_in_verilog(r, me, proto, rp)
        lines += self._regs_verilog(me, proto, rp)
        return "\n".join(lines + ["endmodule", ""])

    def _row_verilog(self, r: int, me, proto, rp) -> list:
        """Row port r as an instance (its outputs on wires `r<r>_<port>`): the chains from the row
        above (row 0: the launch record and iterator; a tile's first row: its launch unit's when it
        launches, and no write record from a tap above), and its share of the moving requests."""
        chain = {"req_in": ("rec", "req_out"), "xit_in": ("xit", "xit_out"), "down_in": (None, "down_out")}
        entry = bool(r and self.tile and r % self.tile == 0)
        feed = getattr(self, f"feed{r // self.tile}") if entry else None
        conns, lines = [".clk(clk)", ".rst(rst)"], []
        for n, (v, flow) in rp.ports.items():
            if flow != In:
                lines.append(f"  wire [{len(v) - 1}:0] r{r}_{n};")
                conns.append(f".{n}(r{r}_{n})")
            elif n == "index":
                conns.append(f".index({len(v)}'d{r})")
            elif n in ("req_shift", "advance"):
                conns.append(f".{n}({me.bits(self.feed.req_shift if n == 'req_shift' else self.advance)})")
            elif n == "mv_resp":
                conns.append(f".mv_resp({me.bits(self.mv.resp.data[r])})")
            elif n in chain:
                top, out = chain[n]
                src = rp.bits(getattr(proto, out), f"r{r - 1}_") if r else me.bits(getattr(self.feed, top)) if top \
                    else f"{len(v)}'d0"
                if entry and top:
                    src = f"{me.bits(feed.rec.valid)} ? {me.bits(getattr(feed, top))} : {src}"
                elif entry:
                    src = f"{rp.bits(proto.down_tap, f'r{r - 1}_')} ? {len(v)}'d0 : {src}"
                conns.append(f".{n}({src})")
            else:
                raise ValueError(f"rtl/rows.py: no connection for the row port's input {n!r}")
        lines.append(f"  {proto.module_name} rowport{r}({', '.join(conns)});")
        return lines + [f"  assign {me.bits(getattr(self.mv.req, f)[r])} = {rp.bits(proto.mv_req[f], f'r{r}_')};"
                        for f, _ in proto.mv_req.shape()]

    def _row_in_verilog(self, r: int, me, proto, rp) -> list:
        """Row r's moving value: the row port's, its dtype the table's with `lut_dtype_sel`, its code
        slots 0 .. MV_ELEMS - 1 the table's entries with `lut_code`; and its table indices."""
        mine, a, p = proto.row_in, self.row_in[r], f"r{r}_"
        sel, code = rp.bits(proto.lut_dtype_sel, p), rp.bits(proto.lut_code, p)
        parts = {rp.span(mine.dtype)[1]: (a.dtype, f"{sel} ? {me.bits(self.lut.dtype)} : {rp.bits(mine.dtype, p)}")}
        lines = []
        for j in range(MV_ELEMS):
            k, src = r * MV_ELEMS + j, slot(mine.code, j)
            lines.append(f"  assign {me.bits(self.lut.index[k])} = {rp.bits(src[:8], p)};")
            entry = me.bits(self.lut.entry[k][:len(src)])
            parts[rp.span(src)[1]] = (slot(a.code, j), f"{code} ? {entry} : {rp.bits(src, p)}")
        whole, mine_v, at = a.as_value(), mine.as_value(), 0
        for first in sorted(parts) + [len(mine_v)]:           # the other fields pass through
            if first > at:
                lines.append(f"  assign {me.bits(whole[at:first])} = {rp.bits(mine_v[at:first], p)};")
            if first in parts:
                dst, expr = parts[first]
                lines.append(f"  assign {me.bits(dst)} = {expr};")
                at = first + len(Value.cast(dst))
        return lines

    def _regs_verilog(self, me, proto, rp) -> list:
        """The first marks, the write record leaving the bottom row, and the transpose delay lines
        (registers of the sync domain: synchronous reset `rst`, reset value 0)."""
        R, last = self.rows, f"r{self.rows - 1}_"
        swap = rp.bits(proto.row_in.swap, "r0_")
        lines = [f"  reg [{R - 1}:0] first_mark = {R}'d0;",
                 f"  assign {me.bits(self.down.rec)} = {rp.bits(proto.down_out, last)};",
                 f"  assign {me.bits(self.down.first)} = first_mark[{R - 1}] & {rp.bits(proto.down_out.valid, last)};"]
        resets = ["first_mark <= 0;"]
        shifts = [f"first_mark <= {{first_mark[{R - 2}:0], {swap}}};" if R > 1 else f"first_mark <= {swap};"]
        if self.tile:
            lines += self._taps_verilog(me, proto, rp)
            shifts = [f"first_mark <= {{{', '.join(reversed(self._marks_verilog(proto, rp)))}}};"]
        feeds = {r + j * R: (r, j) for r in range(R) for j in range(1, self.rounds) if r + j * R < self.cols}
        for c in range(max(self.cols, 1)):
            if c not in feeds:
                lines += [f"  assign {me.bits(self.top_psum[c])} = 32'd0;",
                          f"  assign {me.bits(self.top_valid[c])} = 1'b0;"]
                continue
            r, j = feeds[c]
            w, p = 33 * j * R, f"r{r}_"
            head = f"{rp.bits(proto.xfeed_valid[j], p)} ? {{1'b1, {rp.bits(proto.xfeed[j], p)}}} : 33'd0"
            lines += [f"  reg [{w - 1}:0] xtop{c} = {w}'d0;",
                      f"  assign {me.bits(self.top_psum[c])} = xtop{c}[{w - 2}:{w - 33}];",
                      f"  assign {me.bits(self.top_valid[c])} = xtop{c}[{w - 1}];"]
            resets.append(f"xtop{c} <= 0;")
            shifts.append(f"xtop{c} <= {{xtop{c}[{w - 34}:0], {head}}};" if w > 33 else f"xtop{c} <= {head};")
        return lines + ["  always @(posedge clk) begin", "    if (rst) begin", *("      " + x for x in resets),
                        "    end else if (advance) begin", *("      " + x for x in shifts), "    end", "  end"]

    def _marks_verilog(self, proto, rp) -> list:
        """Row r's next first mark under row tiles: a tile's first row's own value when its record
        enters there, else the mark of the row above (row 0: its own)."""
        marks = [rp.bits(proto.row_in.swap, "r0_")]
        for r in range(1, self.rows):
            above = f"first_mark[{r - 1}]"
            if r % self.tile:
                marks.append(above)
                continue
            p = f"r{r}_"
            own = f"{rp.bits(proto.row_in.first, p)} & {rp.bits(proto.row_in.valid, p)}"
            marks.append(f"(({own}) ? {rp.bits(proto.row_in.swap, p)} : {above})")
        return marks

    def _taps_verilog(self, me, proto, rp) -> list:
        """The write records leaving at the taps below the tiles above the last (`down0`, ...): the
        tile's last row's record where it ends there (`down_tap`), with its first mark."""
        lines = []
        for k in range(self.taps - 1):
            last, tap = (k + 1) * self.tile - 1, getattr(self, f"down{k}")
            p = f"r{last}_"
            here, out = rp.bits(proto.down_tap, p), rp.bits(proto.down_out, p)
            lines += [f"  assign {me.bits(tap.rec)} = {here} ? {out} : {len(Value.cast(tap.rec))}'d0;",
                      f"  assign {me.bits(tap.first)} = first_mark[{last}] & {rp.bits(proto.down_out.valid, p)} & {here};"]
        return lines


class _Names:
    """The Verilog names of the bits of `block`'s ports: `bits(x, prefix)` of a port, or of a field or
    element of one (a slice of its signal), is `<prefix><port>[hi:lo]`."""

    def __init__(self, block):
        self.ports = block_ports(block)
        self.of = {id(v): n for n, (v, _) in self.ports.items()}

    def span(self, value) -> tuple:
        """(port name, first bit, width) of `value` (a signed field is its bits as_signed)."""
        v, first = Value.cast(value), 0
        width = len(v)
        while isinstance(v, Slice) or isinstance(v, Operator) and v.operator in ("s", "u"):
            first, v = (first + v.start, v.value) if isinstance(v, Slice) else (first, v.operands[0])
        return self.of[id(v)], first, width

    def bits(self, value, prefix: str = "") -> str:
        name, first, width = self.span(value)
        return f"{prefix}{name}[{first + width - 1}:{first}]"
