"""The column-serial stationary port (D-T99; docs/timing.md, 'Background loads'): a plain weight load
under the `column_loads` timing profile writes each row of its block LOAD_COLS columns at a time
behind the previous matmul's swap front, while that matmul computes.

A load issued at t sends its column groups g = 0 .. G - 1 (physical columns col0 + 2g, col0 + 2g + 1,
logical columns 2g, 2g + 1 in first-column-first order) into the stage of its first row, one each
`skew` cycles (the passes of the matmul whose front it follows); a group stays `skew` cycles in a
row's stage and moves one row down, so row k holds group g from t + 1 + skew * (k + g).  In its
first cycle there the row requests the group's elements from its own SBUF partition (one
COLUMN_REQUEST: the moving request's plain fields, so the SBUF serves it as it serves a moving row)
over the stationary input path: the answer arrives L - 1 cycles later in the stationary answer's
words MV_ELEMS k .. MV_ELEMS k + MV_ELEMS - 1 (D-T102: row-serial stationary reads wait for a
column load's end, so the two never share a cycle), and the row writes it into the group's PEs
(`cw_*`, to rtl/array.py): cycle timing.column_write.  The element offsets come from one TENSOR3D iterator here, LOAD_COLS x pack
positions per group."""
from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tensore.model.addrmap import PARTITION_BITS, SBUF_OFFSET_BITS
from tensore.model.timing import LOAD_COLS, column_groups, column_load, profile
from tensore.rtl.config import Config
from tensore.rtl.interfaces import Bus, arrays
from tensore.rtl.isa import Kind, uop_layout
from tensore.rtl.links import column_writes, issue_link
from tensore.rtl.pe import COL_BITS, code_layout, slot_width, weight_layout
from tensore.rtl.rowport import MV_ELEMS, MV_REQUEST, PatternIter
from tensore.rtl.wires import record, wire

# a column group on its way down the rows
GROUP = data.StructLayout({
    "valid": 1, "part": PARTITION_BITS, "offs": data.ArrayLayout(SBUF_OFFSET_BITS, MV_ELEMS), "esize": 3,
    "col": COL_BITS, "mask": LOAD_COLS, "dtype": 8, "pack": 4, "skew4": 1, "rows": 8})
# what a row's answer is for, L - 1 cycles after its request
ANSWER = data.StructLayout({"mask": LOAD_COLS, "col": COL_BITS, "dtype": 8, "pack": 4})


# a row's request: the moving request's plain fields (rtl/rowport.py MV_REQUEST), one per row
COLUMN_REQUEST = data.StructLayout({name: MV_REQUEST[name].shape
                                    for name in ("valid", "part", *(f"off{j}" for j in range(MV_ELEMS)), "esize")})


def column_rows(rows: int, timing) -> int:
    """The rows of column-serial requests (the engine's `cl` port) and of their answers at the head
    of the stationary answer: the array's under `column_loads`, else none (D-T102)."""
    return rows if profile(timing).column_loads else 0


class ColumnLoad(wiring.Component):
    """`issue`: the sequencer's micro-op (rtl/links.py; `skew4`: the rows skew by 4, the last
    matmul's passes); out: the rows' SBUF requests (`req`, field-major as the moving port's) and
    their answers (`resp`), the column writes (`cw`, to the array)."""

    def __init__(self, cfg: Config):
        self.rows, self.cols, self.pack, self.L = cfg.rows, cfg.cols, cfg.pack, cfg.sbuf_latency
        rows, cols, pack = self.rows, self.cols, self.pack
        super().__init__({
            "issue": In(issue_link()),
            "req": Out(wiring.Signature({n: Out(s) for n, s in arrays(COLUMN_REQUEST, rows).items()})),
            "resp": In(Bus(32 * MV_ELEMS, rows)),
            "cw": Out(column_writes(rows, pack)),
        })

    def elaborate(self, platform):
        m = Module()
        emit, row0, group = self._groups(m)
        above = None
        for k in range(self.rows):
            above = self._row(m, k, emit & (row0 == k), group, above)
        return m

    def _groups(self, m):
        """The next column group (its element offsets from the TENSOR3D iterator) and whether it
        enters its first row's stage this cycle: at the load's issue, then each `skew` cycles."""
        u = self.issue.uop
        go = wire(m, self.issue.valid & (u.kind == Kind.LOAD) & u.supported &
                  column_load(u.tags, u.tagw, u.xpose, u.mx, u.lut, u.lcf), "cl_go")
        held = Signal(uop_layout(), name="cl_held")
        skew4 = Signal(name="cl_skew4")
        left, wait, col = Signal(8, name="cl_left"), Signal(2, name="cl_wait"), Signal(COL_BITS, name="cl_col")
        cur = wire(m, Mux(go, u.as_value(), held.as_value()), "cl_cur", uop_layout())
        s4 = Mux(go, self.issue.skew4, skew4)
        emit = wire(m, go | ((left != 0) & (wait == 0)), "cl_emit")
        it = PatternIter(m, "cl_it", go, cur.src_off, cur.src_num, cur.src_step, cur.esize, SBUF_OFFSET_BITS)
        i, o, offs = it.i, it.o, []
        for j in range(MV_ELEMS):                    # positions 2 * pack * g + j
            offs.append(it.offset(o))
            nxt = it.step(i, o)
            if j == 1:
                i2, o2 = nxt
            i, o = nxt
        two = cur.pack == 1
        it.commit(emit, [Mux(two, a, b) for a, b in zip(i2, i)], [Mux(two, a, b) for a, b in zip(o2, o)])
        first_col = Mux(go, u.col0, col)
        n_left = Mux(go, column_groups(u.cols), left)
        with m.If(go):
            m.d.sync += [held.eq(u), skew4.eq(self.issue.skew4)]
        with m.If(emit):
            m.d.sync += [left.eq(n_left - 1), wait.eq(Mux(s4, 3, 0)), col.eq(first_col + LOAD_COLS)]
        with m.Elif(wait != 0):
            m.d.sync += wait.eq(wait - 1)
        end = cur.col0 + cur.cols
        group = Signal(GROUP, name="cl_group")
        m.d.comb += [group.valid.eq(emit), group.part.eq(cur.src_part), group.esize.eq(cur.esize),
                     group.col.eq(first_col), group.mask.eq(Mux(first_col + 1 < end, 3, 1)),
                     group.dtype.eq(cur.dtype), group.pack.eq(cur.pack), group.skew4.eq(s4), group.rows.eq(cur.rows)]
        for j in range(MV_ELEMS):
            m.d.comb += group.offs[j].eq(offs[j] if j < 2 else Mux(two, 0, offs[j]))
        return emit, cur.row0, group

    def _row(self, m, k, inject, group, above):
        """Row k's stage: it takes a group entering at its row (`inject`) or leaving the row above,
        requests it in its first cycle, holds it `skew` cycles, and writes the answer L - 1 cycles
        later."""
        st = Signal(GROUP, name=f"cl_st{k}")
        wait, fresh = Signal(2, name=f"cl_wait{k}"), Signal(name=f"cl_fresh{k}")
        if above is None:
            take, incoming = inject, group
        else:
            prev, prev_wait = above
            down = prev.valid & (prev_wait == 0) & (prev.rows > 1)
            moved = Signal(GROUP, name=f"cl_in{k}")
            m.d.comb += [moved.eq(prev), moved.part.eq(prev.part + 1), moved.rows.eq(prev.rows - 1)]
            take = inject | down
            incoming = Mux(inject, group.as_value(), moved.as_value())
        with m.If(take):
            m.d.sync += [st.eq(incoming), wait.eq(Mux(data.View(GROUP, incoming).skew4, 3, 0)), fresh.eq(1)]
        with m.Else():
            m.d.sync += fresh.eq(0)
            with m.If(wait != 0):
                m.d.sync += wait.eq(wait - 1)
            with m.Else():
                m.d.sync += st.valid.eq(0)
        q = self.req
        m.d.comb += [q.valid[k].eq(st.valid & fresh), q.part[k].eq(st.part), q.esize[k].eq(st.esize)]
        for j in range(MV_ELEMS):
            m.d.comb += getattr(q, f"off{j}")[k].eq(st.offs[j])
        self._answer(m, k, st, fresh)
        return st, wait

    def _answer(self, m, k, st, fresh):
        """Row k's column write: the request's group L - 1 cycles later, with the answer's words as
        the two columns' codes (pack per column)."""
        pipe = [Signal(ANSWER, name=f"cl_ans{k}_{i}") for i in range(self.L - 1)]
        now = Signal(ANSWER, name=f"cl_ask{k}")
        m.d.comb += [now.mask.eq(Mux(st.valid & fresh, st.mask, 0)), now.col.eq(st.col), now.dtype.eq(st.dtype),
                     now.pack.eq(st.pack)]
        for i, p in enumerate(pipe):
            m.d.sync += p.eq(pipe[i - 1] if i else now)
        a = pipe[-1] if pipe else now
        words = [self.resp[k][32 * j:32 * j + 32] for j in range(MV_ELEMS)]
        recs = []
        for c in range(LOAD_COLS):              # pack 1: word c; pack 2: words 2c, 2c + 1 (slots 0, 1)
            codes = {name: Mux(a.pack == 1, words[c] if j == 0 else 0, words[2 * c + j] if j < 2 else 0)[:slot_width(j)]
                     for j, (name, _) in enumerate(code_layout(self.pack))}
            recs.append(record(weight_layout(self.pack), code=record(code_layout(self.pack), **codes),
                               dtype=a.dtype, scale=0, scale_nan=0))
        m.d.comb += [self.cw.valid[k].eq(a.mask), self.cw.col[k].eq(a.col), self.cw.data[k].eq(Cat(*recs))]
