"""What each PE's weights were loaded as, for the matmul-time refusals of D-T31 (rtl/decoder.py).

The golden engine refuses a matmul whose block holds weights of the other fp32 class than its input
(DTYPE_MIX) or weights loaded with another pack than it streams (BAD_MX); it reads the last load into
each PE (model.engine.Engine._current).  Here four planes of rows x cols bits hold, per PE:
a load reached it, that load was FP32 (a LUT load: the table's entry dtype), and log2 of its pack,
a row at a time (WeightRow).  A load writes its block in its issue cycle; a query over a block
answers in the same cycle."""
from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from tensore.model.isa.microop import MAX_PACK, UOP_FIELDS
from tensore.rtl.blackbox import black_box, prototype
from tensore.rtl.wires import span

BLOCK = data.StructLayout({name: UOP_FIELDS[name].width for name in ("row0", "rows", "col0", "cols")})
PACK = UOP_FIELDS["pack"].width


def _log2_pack(pack):
    """log2 of a pack of 1, 2, 4 or 8 elements, as 2 bits."""
    assert MAX_PACK == 8
    return Cat(pack[1] | pack[3], pack[2] | pack[3])


class WeightRow(wiring.Component):
    """One array row's planes (`cols` bits each): `load` (the row is in the load's block) writes
    `bits` (loaded, fp32, log2 pack) into the columns `lcol`; `query` (the row is in the query's
    block) answers over the columns `qcol` whether a loaded PE holds another fp32 class than `q_fp32`
    (`mix`) or another log2 pack than `q_log2` (`pump`).  A block of its own, exported once for all
    rows (rtl/export.py), since a row's Amaranth netlist is bit-level."""

    def __init__(self, cols: int):
        self.cols = cols
        self.module_name = f"tensore_weight_row_c{cols}"
        super().__init__({"load": In(1), "lcol": In(cols), "bits": In(4), "query": In(1), "qcol": In(cols),
                          "q_fp32": In(1), "q_log2": In(2), "mix": Out(1), "pump": Out(1)})

    def elaborate(self, platform):
        m = Module()
        C = self.cols
        loaded, fp32, p0, p1 = planes = [Signal(C, name=n) for n in ("loaded", "fp32", "p0", "p1")]
        with m.If(self.load):
            m.d.sync += [x.eq((x & ~self.lcol) | (self.lcol & self.bits[i].replicate(C))) for i, x in enumerate(planes)]
        held = loaded & self.qcol
        other = held & (fp32 ^ self.q_fp32.replicate(C))
        repack = held & ((p0 ^ self.q_log2[0].replicate(C)) | (p1 ^ self.q_log2[1].replicate(C)))
        m.d.comb += [self.mix.eq(self.query & (other != 0)), self.pump.eq(self.query & (repack != 0))]
        return m


class WeightState(wiring.Component):
    """`load` (with `block`, `fp32`, `pack`): a weight load of this cycle; `query` (with `q_fp32`,
    `q_pack`): the matmul at the FIFO head, answered by `mix` and `pump`.  `black_box`: the rows are
    instances of WeightRow's exported module."""

    def __init__(self, rows: int, cols: int, black_box: bool = False):
        self.rows, self.cols, self.black_box = rows, cols, black_box
        super().__init__({
            "load": In(1), "block": In(BLOCK), "fp32": In(1), "pack": In(PACK),
            "query": In(BLOCK), "q_fp32": In(1), "q_pack": In(PACK),
            "mix": Out(1),      # a loaded PE of the query block holds the other fp32 class than q_fp32
            "pump": Out(1),     # a loaded PE of the query block was loaded with another pack than q_pack
        })

    def blocks(self) -> list:
        return [prototype(WeightRow(self.cols))]

    def elaborate(self, platform):
        m = Module()
        R, C = self.rows, self.cols
        b, q = self.block, self.query
        lrow, lcol = span(m, "load_rows", b.row0, b.rows, R), span(m, "load_cols", b.col0, b.cols, C)
        qrow, qcol = span(m, "query_rows", q.row0, q.rows, R), span(m, "query_cols", q.col0, q.cols, C)
        bits = Cat(Const(1, 1), self.fp32, _log2_pack(self.pack))
        mix, pump = Signal(R), Signal(R)
        for r in range(R):
            m.submodules[f"row{r}"] = row = black_box(WeightRow(C), self.black_box)
            m.d.comb += [row.load.eq(self.load & lrow[r]), row.lcol.eq(lcol), row.bits.eq(bits),
                         row.query.eq(qrow[r]), row.qcol.eq(qcol), row.q_fp32.eq(self.q_fp32),
                         row.q_log2.eq(_log2_pack(self.q_pack)), mix[r].eq(row.mix), pump[r].eq(row.pump)]
        m.d.comb += [self.mix.eq(mix != 0), self.pump.eq(pump != 0)]
        return m
