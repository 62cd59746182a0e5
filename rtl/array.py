"""The systolic array: rows x cols PEs, the input skew, weight and tag load buses (D-14, D-15).

A moving vector enters all rows at once on `vec_in`; row r is delayed r stages (the skew), so
element (r, v) reaches PE (r, c) r + c stages after the vector entered.  Stages advance when
`advance` is high (every cycle, or every 4th in the fp32 HIGH / LOW_HIGH modes).  Partial sums leave
the bottom row on `out_psum` / `out_valid`.  Weight rows are written into the shadow registers of
row `wl_row` (columns in `wl_cols`), tags into row `tag_row`."""
from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.pe import PE, act_layout, weight_layout


class Array(wiring.Component):
    def __init__(self, gen, rows: int, cols: int, pack: int = 1):
        self.gen, self.rows, self.cols, self.pack = gen, rows, cols, pack
        super().__init__({
            "vec_in": In(data.ArrayLayout(act_layout(pack), rows)),
            "advance": In(1), "phase": In(2),
            "wl_valid": In(1), "wl_row": In(range(rows)), "wl_cols": In(cols),
            "wl_data": In(data.ArrayLayout(weight_layout(pack), cols)),
            "tag_valid": In(1), "tag_row": In(range(rows)), "tag_cols": In(cols),
            "tag_data": In(data.ArrayLayout(4, cols)),
            "out_psum": Out(data.ArrayLayout(32, cols)), "out_valid": Out(cols),
        })
        self.pes = [[PE(gen, pack) for _ in range(cols)] for _ in range(rows)]

    def elaborate(self, platform):
        m = Module()
        lay = act_layout(self.pack)
        for r in range(self.rows):
            stage = self.vec_in[r]
            for k in range(r):                                   # the skew: r stages for row r
                nxt = Signal(lay, name=f"skew_r{r}_s{k}")
                with m.If(self.advance):
                    m.d.sync += nxt.eq(stage)
                stage = nxt
            for c in range(self.cols):
                pe = self.pes[r][c]
                m.submodules[f"pe_r{r}_c{c}"] = pe
                m.d.comb += [
                    pe.col_index.eq(c), pe.advance.eq(self.advance), pe.phase.eq(self.phase),
                    pe.act_in.eq(stage if c == 0 else self.pes[r][c - 1].act_out),
                    pe.wl_valid.eq(self.wl_valid & (self.wl_row == r) & self.wl_cols[c]),
                    pe.wl.eq(self.wl_data[c]),
                    pe.tag_valid.eq(self.tag_valid & (self.tag_row == r) & self.tag_cols[c]),
                    pe.tag_in.eq(self.tag_data[c]),
                ]
                if r:
                    m.d.comb += [pe.psum_in.eq(self.pes[r - 1][c].psum_out),
                                 pe.psum_valid_in.eq(self.pes[r - 1][c].psum_valid_out)]
        for c in range(self.cols):
            bottom = self.pes[-1][c]
            m.d.comb += [self.out_psum[c].eq(bottom.psum_out), self.out_valid[c].eq(bottom.psum_valid_out)]
        return m
