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
instantiates the separately exported module below it, so the Verilog of a 128 x 256 array holds one
PE and one row definition."""
from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tensore.model.dtypes import Gen
from tensore.rtl.blackbox import instance_of
from tensore.rtl.fp.pe_mac import dtypes_suffix
from tensore.rtl.pe import PE, PEBlackBox, act_layout, weight_layout


def row_module_name(gen, cols: int, pack: int, dtypes=None) -> str:
    return f"tensore_row_{Gen.parse(gen).name.lower()}_c{cols}_p{pack}{dtypes_suffix(dtypes)}"


def array_module_name(gen, rows: int, cols: int, pack: int, dtypes=None) -> str:
    return f"tensore_array_{Gen.parse(gen).name.lower()}_r{rows}_c{cols}_p{pack}{dtypes_suffix(dtypes)}"


def _row_signature(cols: int, pack: int) -> dict:
    return {
        "act_in": In(act_layout(pack)),
        "psum_in": In(data.ArrayLayout(32, cols)), "psum_valid_in": In(cols),
        "psum_out": Out(data.ArrayLayout(32, cols)), "psum_valid_out": Out(cols),
        "advance": In(1), "phase": In(2),
        "wl_valid": In(1), "wl_cols": In(cols), "wl_data": In(data.ArrayLayout(weight_layout(pack), cols)),
        "tag_valid": In(1), "tag_cols": In(cols), "tag_data": In(data.ArrayLayout(4, cols)),
    }


class ArrayRow(wiring.Component):
    """One row of PEs: the moving value passes right, each PE's sum goes down to the next row."""

    def __init__(self, gen, cols: int, pack: int = 1, *, black_box_pe: bool = False, dtypes=None):
        self.gen, self.cols, self.pack = gen, cols, pack
        super().__init__(_row_signature(cols, pack))
        make = PEBlackBox if black_box_pe else PE
        self.pes = [make(gen, pack, dtypes=dtypes) for _ in range(cols)]

    def elaborate(self, platform):
        m = Module()
        for c, pe in enumerate(self.pes):
            m.submodules[f"pe{c}"] = pe
            m.d.comb += [
                pe.col_index.eq(c), pe.advance.eq(self.advance), pe.phase.eq(self.phase),
                pe.act_in.eq(self.act_in if c == 0 else self.pes[c - 1].act_out),
                pe.psum_in.eq(self.psum_in[c]), pe.psum_valid_in.eq(self.psum_valid_in[c]),
                pe.wl_valid.eq(self.wl_valid & self.wl_cols[c]), pe.wl.eq(self.wl_data[c]),
                pe.tag_valid.eq(self.tag_valid & self.tag_cols[c]), pe.tag_in.eq(self.tag_data[c]),
                self.psum_out[c].eq(pe.psum_out), self.psum_valid_out[c].eq(pe.psum_valid_out),
            ]
        return m


class ArrayRowBlackBox(ArrayRow):
    """An instance of the exported row module (`row_module_name`)."""

    def __init__(self, gen, cols: int, pack: int = 1, *, dtypes=None):
        wiring.Component.__init__(self, _row_signature(cols, pack))
        self.gen, self.cols, self.pack, self.pes, self.dtypes = gen, cols, pack, [], dtypes

    def elaborate(self, platform):
        m = Module()
        m.submodules.row = instance_of(self, row_module_name(self.gen, self.cols, self.pack, self.dtypes))
        return m


def _array_signature(rows: int, cols: int, pack: int) -> dict:
    return {
        "row_in": In(data.ArrayLayout(act_layout(pack), rows)),
        "advance": In(1), "phase": In(2),
        "wl_valid": In(1), "wl_row": In(range(rows)), "wl_cols": In(cols),
        "wl_data": In(data.ArrayLayout(weight_layout(pack), cols)),
        "tag_valid": In(1), "tag_row": In(range(rows)), "tag_cols": In(cols),
        "tag_data": In(data.ArrayLayout(4, cols)),
        "top_psum": In(data.ArrayLayout(32, cols)), "top_valid": In(cols),
        "out_psum": Out(data.ArrayLayout(32, cols)), "out_valid": Out(cols),
    }


class Array(wiring.Component):
    def __init__(self, gen, rows: int, cols: int, pack: int = 1, *, black_box: bool = False, dtypes=None):
        """black_box: rows are instances of the exported row module (Verilog for large arrays);
        the default elaborates everything in Amaranth (for Amaranth's simulator, which reads an
        Instance as zeros)."""
        self.gen, self.rows, self.cols, self.pack = gen, rows, cols, pack
        super().__init__(_array_signature(rows, cols, pack))
        self.row_blocks = [ArrayRowBlackBox(gen, cols, pack, dtypes=dtypes) if black_box
                           else ArrayRow(gen, cols, pack, dtypes=dtypes) for _ in range(rows)]
        self.pes = [row.pes for row in self.row_blocks]

    def elaborate(self, platform):
        m = Module()
        for r, row in enumerate(self.row_blocks):
            m.submodules[f"row{r}"] = row
            m.d.comb += [
                row.act_in.eq(self.row_in[r]), row.advance.eq(self.advance), row.phase.eq(self.phase),
                row.wl_valid.eq(self.wl_valid & (self.wl_row == r)), row.wl_cols.eq(self.wl_cols),
                row.wl_data.eq(self.wl_data),
                row.tag_valid.eq(self.tag_valid & (self.tag_row == r)), row.tag_cols.eq(self.tag_cols),
                row.tag_data.eq(self.tag_data),
            ]
            if r:
                above = self.row_blocks[r - 1]
                m.d.comb += [row.psum_in.eq(above.psum_out), row.psum_valid_in.eq(above.psum_valid_out)]
            else:            # transposes (D-13) enter at the top and ride the sum registers down
                m.d.comb += [row.psum_in.eq(self.top_psum), row.psum_valid_in.eq(self.top_valid)]
        bottom = self.row_blocks[-1]
        m.d.comb += [self.out_psum.eq(bottom.psum_out), self.out_valid.eq(bottom.psum_valid_out)]
        return m


class ArrayBlackBox(wiring.Component):
    """An instance of the whole exported array (`array_module_name`: rtl/export.py writes its rows
    as structural Verilog): the engine's netlist then holds one instance, not rows instances each
    connected to the weight bus and two column-wide sum buses (D-T42)."""

    def __init__(self, gen, rows: int, cols: int, pack: int = 1, *, dtypes=None):
        self.gen, self.rows, self.cols, self.pack, self.dtypes = gen, rows, cols, pack, dtypes
        super().__init__(_array_signature(rows, cols, pack))

    def elaborate(self, platform):
        m = Module()
        m.submodules.array = instance_of(self, array_module_name(self.gen, self.rows, self.cols, self.pack,
                                                                 self.dtypes))
        return m
