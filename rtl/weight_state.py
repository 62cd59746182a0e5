"""What each PE's weights were loaded as, for the matmul-time refusals of D-T31 (rtl/decoder.py).

The golden engine refuses a matmul whose block holds weights of the other fp32 class than its input
(DTYPE_MIX) or weights loaded with another pack than it streams (BAD_MX); it reads the last load into
each PE (model.engine.Engine._current_weights).  Here four planes of rows x cols bits hold, per PE:
a load reached it, that load was FP32 (a LUT load: the table's entry dtype), and log2 of its pack.
A load writes its block in its issue cycle; a query over a block answers in the same cycle."""
from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from tensore.model.isa.microop import MAX_PACK, UOP_FIELDS

BLOCK = data.StructLayout({name: UOP_FIELDS[name].width for name in ("row0", "rows", "col0", "cols")})
PACK = UOP_FIELDS["pack"].width


def _span(m, name, lo, n, count):
    """A `count`-bit mask of the indices lo <= i < lo + n."""
    mask = Signal(count, name=name)
    m.d.comb += mask.eq(Cat(*[(i >= lo) & (i < lo + n) for i in range(count)]))
    return mask


def _log2_pack(pack):
    """log2 of a pack of 1, 2, 4 or 8 elements, as 2 bits."""
    assert MAX_PACK == 8
    return Cat(pack[1] | pack[3], pack[2] | pack[3])


class WeightState(wiring.Component):
    """`load` (with `block`, `fp32`, `pack`): a weight load of this cycle; `query` (with `q_fp32`,
    `q_pack`): the matmul at the FIFO head, answered by `mix` and `pump`."""

    def __init__(self, rows: int, cols: int):
        self.rows, self.cols = rows, cols
        super().__init__({
            "load": In(1), "block": In(BLOCK), "fp32": In(1), "pack": In(PACK),
            "query": In(BLOCK), "q_fp32": In(1), "q_pack": In(PACK),
            "mix": Out(1),      # a loaded PE of the query block holds the other fp32 class than q_fp32
            "pump": Out(1),     # a loaded PE of the query block was loaded with another pack than q_pack
        })

    def elaborate(self, platform):
        m = Module()
        R, C = self.rows, self.cols
        planes = {name: [Signal(C, name=f"{name}_r{r}") for r in range(R)] for name in ("loaded", "fp32", "p0", "p1")}
        b, q = self.block, self.query
        lrow, lcol = _span(m, "load_rows", b.row0, b.rows, R), _span(m, "load_cols", b.col0, b.cols, C)
        qrow, qcol = _span(m, "query_rows", q.row0, q.rows, R), _span(m, "query_cols", q.col0, q.cols, C)
        lp, qp = _log2_pack(self.pack), _log2_pack(self.q_pack)
        bits = {"loaded": 1, "fp32": self.fp32, "p0": lp[0], "p1": lp[1]}
        with m.If(self.load):
            for r in range(R):
                with m.If(lrow[r]):
                    m.d.sync += [planes[n][r].eq((planes[n][r] & ~lcol) | Mux(bits[n], lcol, 0)) for n in planes]
        mix, pump = Signal(R), Signal(R)
        for r in range(R):
            held = planes["loaded"][r] & qcol
            other = Mux(self.q_fp32, ~planes["fp32"][r], planes["fp32"][r])
            repack = Mux(qp[0], ~planes["p0"][r], planes["p0"][r]) | Mux(qp[1], ~planes["p1"][r], planes["p1"][r])
            m.d.comb += [mix[r].eq(qrow[r] & ((held & other) != 0)), pump[r].eq(qrow[r] & ((held & repack) != 0))]
        m.d.comb += [self.mix.eq(mix != 0), self.pump.eq(pump != 0)]
        return m
