"""The systolic array: rows of PEs, weight and tag load buses (SPEC D-14, D-15; docs/timing.md).

Row r takes its moving values on `row_in[r]` already skewed: element (r, v) arrives in cycle
t_data + P*(v + r), which the sequencer gets by reading SBUF partition r in its own cycle (the
partitions are separate memories), so the array needs no skew registers.  Values move one column
right and sums one row down per stage; stages advance when `advance` is high (every cycle, or every
4th in the fp32 HIGH / LOW_HIGH modes).  Sums leave the bottom row on `out_psum` / `out_valid`.
A transposing matmul injects element (k, n) at the top of column n (`top_psum` / `top_valid`) in
cycle t_data + k + n; rows without a moving value pass it down, so it leaves the bottom in the
cycle docs/timing.md gives for its PSUM write.

Structure: Array -> ArrayRow (one row block: cols PEs) -> PE.  With black_box=True each level
instantiates the separately exported module below it (rtl/blackbox.py), so the Verilog of a
128 x 256 array holds one PE and one row definition.  The row and the array are pure wiring: their
Verilog (`verilog()`) is written here as structural Verilog from the same port layouts, because
Amaranth's backend needs minutes for the ~30,000 instance connections of a 128 x 256 array (D-T35)."""
from functools import cached_property

from amaranth.hdl import Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tensore.model.dtypes import Gen
from tensore.rtl.array_loop import array_header
from tensore.rtl.blackbox import black_box, prototype
from tensore.rtl.config import Config
from tensore.rtl.interfaces import Bus
from tensore.rtl.links import column_writes, tag_load, weight_load
from tensore.model.timing import LOAD_COLS
from tensore.rtl.pe import COL_BITS, PE, act_layout, build_suffix, weight_layout
from tensore.rtl.wires import any_of


def _row_signature(cols: int, pack: int, sparse32: bool, column_loads: bool = False) -> dict:
    cw = {"cw_valid": In(LOAD_COLS), "cw_col": In(COL_BITS), "cw_data": In(Bus(weight_layout(pack), LOAD_COLS))}
    return {**(cw if column_loads else {}),
        "act_in": In(act_layout(pack, sparse32)),
        "psum_in": In(Bus(32, cols)), "psum_valid_in": In(cols),
        "psum_out": Out(Bus(32, cols)), "psum_valid_out": Out(cols),
        "advance": In(1), "phase": In(2),
        "wl_valid": In(1), "wl_cols": In(cols), "wl_data": In(Bus(weight_layout(pack), cols)),
        "tag_valid": In(1), "tag_cols": In(cols), "tag_data": In(Bus(4, cols)),
    }


class ArrayRow(wiring.Component):
    """One row of PEs: the moving value passes right, each PE's sum goes down to the next row."""

    repeated = True            # instantiated many times: a Verilator hierarchical block (rtl/export.py)

    def __init__(self, gen, cols: int, pack: int = 1, *, black_box_pe: bool = False, dtypes=None,
                 sparse32: bool = False, column_loads: bool = False):
        """`column_loads`: the column-serial weight writes (`cw_*`, rtl/column_load.py, D-T99) beside
        the row-serial bus."""
        self.gen, self.cols, self.pack, self.dtypes, self.sparse32 = gen, cols, pack, dtypes, sparse32
        self.black_box_pe, self.column_loads = black_box_pe, column_loads
        super().__init__(_row_signature(cols, pack, sparse32, column_loads))

    @property
    def module_name(self) -> str:
        g, suffix = Gen.parse(self.gen).name.lower(), build_suffix(self.dtypes, self.sparse32)
        return f"tensore_row_{g}_c{self.cols}_p{self.pack}{suffix}{'_cw' if self.column_loads else ''}"

    def _pe(self):
        return PE(self.gen, self.pack, dtypes=self.dtypes, sparse32=self.sparse32)

    def blocks(self) -> list:
        """The separately exported block it instantiates."""
        return [prototype(self._pe())]

    @cached_property
    def pes(self) -> list:
        return [black_box(self._pe(), self.black_box_pe) for _ in range(self.cols)]

    def elaborate(self, platform):
        m = Module()
        for c, pe in enumerate(self.pes):
            m.submodules[f"pe{c}"] = pe
            wl_valid, wl = self.wl_valid & self.wl_cols[c], self.wl_data[c]
            if self.column_loads:       # column c takes record j of a group from cw_col = c - j
                hits = [self.cw_valid[j] & (self.cw_col == c - j) for j in range(LOAD_COLS) if c >= j]
                wl_valid = wl_valid | any_of(hits)
                for j, hit in reversed(list(enumerate(hits))):
                    wl = Mux(hit, self.cw_data[j], wl)
            m.d.comb += [
                pe.col_index.eq(c), pe.advance.eq(self.advance), pe.phase.eq(self.phase),
                pe.act_in.eq(self.act_in if c == 0 else self.pes[c - 1].act_out),
                pe.psum_in.eq(self.psum_in[c]), pe.psum_valid_in.eq(self.psum_valid_in[c]),
                pe.wl_valid.eq(wl_valid), pe.wl.eq(wl),
                pe.tag_valid.eq(self.tag_valid & self.tag_cols[c]), pe.tag_in.eq(self.tag_data[c]),
                self.psum_out[c].eq(pe.psum_out), self.psum_valid_out[c].eq(pe.psum_valid_out),
            ]
        return m

    def verilog(self) -> str:
        """The row as structural Verilog: `cols` instances of the PE module."""
        a, w, cols = act_layout(self.pack, self.sparse32).size, weight_layout(self.pack).size, self.cols
        pe = self.blocks()[0].module_name
        cw = self.column_loads
        lines = [f"// {cols} PEs: moving values pass right, sums go down (rtl/array.py ArrayRow).",
                 f"module {self.module_name}(clk, rst, act_in, psum_in, psum_valid_in, psum_out, psum_valid_out, advance, "
                 + "phase,", "    wl_valid, wl_cols, wl_data, tag_valid, tag_cols, tag_data"
                 + (", cw_valid, cw_col, cw_data);" if cw else ");"),
                 "  input clk, rst, advance, wl_valid, tag_valid;", "  input [1:0] phase;",
                 *([f"  input [{LOAD_COLS - 1}:0] cw_valid;", f"  input [{COL_BITS - 1}:0] cw_col;",
                    f"  input [{w * LOAD_COLS - 1}:0] cw_data;"] if cw else []),
                 f"  input [{a - 1}:0] act_in;", f"  input [{32 * cols - 1}:0] psum_in;",
                 f"  input [{cols - 1}:0] psum_valid_in, wl_cols, tag_cols;",
                 f"  output [{32 * cols - 1}:0] psum_out;", f"  output [{cols - 1}:0] psum_valid_out;",
                 f"  input [{w * cols - 1}:0] wl_data;", f"  input [{4 * cols - 1}:0] tag_data;",
                 f"  wire [{a - 1}:0] act [0:{cols}];", "  assign act[0] = act_in;",
                 "  genvar c;", f"  generate for (c = 0; c < {cols}; c = c + 1) begin : pe",
                 "    wire [31:0] w_code;", *self._column_writes_verilog(w),
                 f"    {pe} u(.clk(clk), .rst(rst), .col_index({COL_BITS}'(c)), .act_in(act[c]), .act_out(act[c + 1]),",
                 "      .psum_in(psum_in[32*c +: 32]), .psum_valid_in(psum_valid_in[c]),",
                 "      .psum_out(psum_out[32*c +: 32]), .psum_valid_out(psum_valid_out[c]),",
                 "      .advance(advance), .phase(phase), .wl_valid(" + ("wv" if cw else "wl_valid & wl_cols[c]") + "),",
                 "      .wl(" + ("wd" if cw else f"wl_data[{w}*c +: {w}]") + "), .tag_valid(tag_valid & tag_cols[c]), "
                 ".tag_in(tag_data[4*c +: 4]),",
                 "      .w_code(w_code));", "  end endgenerate", "endmodule", ""]
        return "\n".join(lines)


    def _column_writes_verilog(self, w: int) -> list:
        """Column c's weight write (`wv`, `wd`): record j of a column group written from cw_col = c - j,
        else the row-serial bus."""
        if not self.column_loads:
            return []
        hits = [f"(c >= {j} && cw_valid[{j}] && cw_col == {COL_BITS}'(c - {j}))" for j in range(LOAD_COLS)]
        data = f"wl_data[{w}*c +: {w}]"
        for j in reversed(range(LOAD_COLS)):
            data = f"hit[{j}] ? cw_data[{w * j} +: {w}] : {data}"
        return [f"    wire [{LOAD_COLS - 1}:0] hit = {{{', '.join(reversed(hits))}}};",
                "    wire wv = (wl_valid & wl_cols[c]) | (|hit);", f"    wire [{w - 1}:0] wd = {data};"]


def _array_signature(rows: int, cols: int, pack: int, sparse32: bool, column_loads: bool = False,
                     taps: int = 1) -> dict:
    tiles = {name: Out(shape) for k in range(taps - 1)
             for name, shape in ((f"tap{k}_psum", Bus(32, cols)), (f"tap{k}_valid", cols))}
    return {**({"cw": In(column_writes(rows, pack))} if column_loads else {}), **tiles,
        "row_in": In(Bus(act_layout(pack, sparse32), rows)),
        "advance": In(1), "phase": In(2),
        "wl": In(weight_load(rows, cols, pack)), "tag": In(tag_load(rows, cols)),
        "top_psum": In(Bus(32, cols)), "top_valid": In(cols),
        "out_psum": Out(Bus(32, cols)), "out_valid": Out(cols),
    }


class Array(wiring.Component):
    def __init__(self, cfg: Config, *, black_box: bool = False, column_loads: bool | None = None):
        """The build's rows x cols PEs of `pack` elements (rtl/config.py; `sparse32`: MatmulSparse fmaps
        of 32 bits, D-T40 (3)).  black_box: rows are instances of the exported row module (Verilog for
        large arrays); the default elaborates everything in Amaranth (for Amaranth's simulator, which
        reads an Instance as zeros).  As a black box itself (rtl/blackbox.py), the engine's netlist
        holds one array instance, not rows instances each on the weight bus and two column-wide sum
        buses.  `column_loads`: each row's column-serial weight writes (`cw_*`, rtl/column_load.py);
        None: as the build's timing profile has them."""
        self.gen, self.rows, self.cols, self.pack, self.dtypes = cfg.generation, cfg.rows, cfg.cols, cfg.pack, \
            cfg.dtypes
        self.black_box_rows, self.sparse32 = black_box, cfg.sparse32
        self.column_loads = cfg.column_loads if column_loads is None else column_loads
        self.tile, self.taps = cfg.tile, cfg.rows // cfg.tile          # row tiles side by side (D-T100)
        rows, cols, pack, sparse32, column_loads = self.rows, self.cols, self.pack, self.sparse32, self.column_loads
        super().__init__(_array_signature(rows, cols, pack, sparse32, column_loads, self.taps))

    @property
    def module_name(self) -> str:
        g = Gen.parse(self.gen).name.lower()
        cw = "_cw" if self.column_loads else ""
        tiles = f"_t{self.tile}" if self.taps > 1 else ""
        return (f"tensore_array_{g}_r{self.rows}_c{self.cols}_p{self.pack}{build_suffix(self.dtypes, self.sparse32)}"
                f"{cw}{tiles}")

    def _row(self):
        return ArrayRow(self.gen, self.cols, self.pack, dtypes=self.dtypes, sparse32=self.sparse32,
                        column_loads=self.column_loads)

    def blocks(self) -> list:
        """The separately exported block it instantiates."""
        return [prototype(self._row())]

    @cached_property
    def row_blocks(self) -> list:
        return [black_box(self._row(), self.black_box_rows) for _ in range(self.rows)]

    @property
    def pes(self) -> list:
        return [row.pes for row in self.row_blocks]

    def elaborate(self, platform):
        m = Module()
        for r, row in enumerate(self.row_blocks):
            m.submodules[f"row{r}"] = row
            m.d.comb += [
                row.act_in.eq(self.row_in[r]), row.advance.eq(self.advance), row.phase.eq(self.phase),
                row.wl_valid.eq(self.wl.valid & (self.wl.row == r)), row.wl_cols.eq(self.wl.cols),
                row.wl_data.eq(self.wl.data),
                row.tag_valid.eq(self.tag.valid & (self.tag.row == r)), row.tag_cols.eq(self.tag.cols),
                row.tag_data.eq(self.tag.data),
            ]
            if self.column_loads:
                m.d.comb += [row.cw_valid.eq(self.cw.valid[r]), row.cw_col.eq(self.cw.col[r]),
                             row.cw_data.eq(self.cw.data[r])]
            if r:
                above = self.row_blocks[r - 1]
                m.d.comb += [row.psum_in.eq(above.psum_out), row.psum_valid_in.eq(above.psum_valid_out)]
            else:            # transposes (D-13) enter at the top and ride the sum registers down
                m.d.comb += [row.psum_in.eq(self.top_psum), row.psum_valid_in.eq(self.top_valid)]
        bottom = self.row_blocks[-1]
        m.d.comb += [self.out_psum.eq(bottom.psum_out), self.out_valid.eq(bottom.psum_valid_out)]
        for k in range(self.taps - 1):            # the sums below each tile but the last (D-T100)
            row = self.row_blocks[(k + 1) * self.tile - 1]
            m.d.comb += [getattr(self, f"tap{k}_psum").eq(row.psum_out),
                         getattr(self, f"tap{k}_valid").eq(row.psum_valid_out)]
        return m

    def _column_ports_verilog(self) -> str:
        w = weight_layout(self.pack).size * LOAD_COLS
        return (f", .cw_valid(cw_valid[{LOAD_COLS}*r +: {LOAD_COLS}]), .cw_col(cw_col[{COL_BITS}*r +: {COL_BITS}]),"
                f" .cw_data(cw_data[{w}*r +: {w}])")

    def verilog(self, name: str | None = None) -> str:
        """The array as structural Verilog: `rows` instances of the row module."""
        a, rows = act_layout(self.pack, self.sparse32).size, self.rows
        row = self.blocks()[0].module_name
        rb = max(1, (rows - 1).bit_length())
        lines = [f"// {rows} x {self.cols} weight-stationary array (rtl/array.py Array), rows of {row}.",
                 *array_header(name or self.module_name, rows, self.cols, self.pack, self.sparse32, self.column_loads,
                               self.taps),
                 f"  wire [{32 * self.cols - 1}:0] psum [0:{rows}];", f"  wire [{self.cols - 1}:0] valid [0:{rows}];",
                 "  assign psum[0] = top_psum;", "  assign valid[0] = top_valid;",
                 "  genvar r;", f"  generate for (r = 0; r < {rows}; r = r + 1) begin : row",
                 f"    {row} u(.clk(clk), .rst(rst), .act_in(row_in[{a}*r +: {a}]), .psum_in(psum[r]),",
                 "      .psum_valid_in(valid[r]), .psum_out(psum[r + 1]), .psum_valid_out(valid[r + 1]),",
                 f"      .advance(advance), .phase(phase), .wl_valid(wl_valid && wl_row == {rb}'(r)), .wl_cols(wl_cols),",
                 f"      .wl_data(wl_data), .tag_valid(tag_valid && tag_row == {rb}'(r)), .tag_cols(tag_cols),",
                 "      .tag_data(tag_data)" + (self._column_ports_verilog() if self.column_loads else "") + ");",
                 "  end endgenerate",
                 f"  assign out_psum = psum[{rows}];", f"  assign out_valid = valid[{rows}];",
                 *(x for k in range(self.taps - 1) for x in (f"  assign tap{k}_psum = psum[{(k + 1) * self.tile}];",
                                                             f"  assign tap{k}_valid = valid[{(k + 1) * self.tile}];")),
                 "endmodule", ""]
        return "\n".join(lines)
