"""The matmul launch unit (docs/timing.md, D-T38, D-T40): vector v of a matmul is launched in t + P*v
as a record (REC_LAYOUT) into the row ports' request chain, which row r requests with P*r later.

It keeps the matmul rhythm (the issue cycle of the current rhythm and its passes P: the request
chain moves and the array advances once per P cycles, t_data = t_ref + L), the source and
destination TENSOR3D iterators, MX addressing (vector v's `pack` elements: indices from e0(v),
`stride` apart, in the micro-op's element order, D-T25) and PeManageSeed's transpose, launched at
the cycle the sequencer names.  A transposing matmul's row 0 starts its element iterator (`xit`)."""
from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tensore.model.dtypes import Gen
from tensore.model.timing import tile_stream
from tensore.rtl.config import Config
from tensore.rtl.isa import Kind, MxOrder, uop_layout
from tensore.rtl.links import T, issue_link, row_feed
from tensore.rtl.fp.pe_mac import dtypes_suffix
from tensore.rtl.mx import map_of, tile
from tensore.rtl.rowport import PatternIter, xpose_rounds
from tensore.rtl.wires import any_of, wire


UNSUPPORTED = data.StructLayout({"pack": 1, "dtype": 1, "xpose_rows": 1})   # the causes a matmul raises it for


class Launch(wiring.Component):
    """`issue` / `now`: the sequencer's (rtl/links.py; seed_at: a PeManageSeed's transpose cycle).
    Out: the head of the row ports' request chain (`feed`: row 0's launch record and transpose
    iterator, the chain's shift), the array rhythm (`advance`, `phase`) and `first_cycle` (the cycle after an advance, when the
    columns' new outputs are written; so a change of rhythm, 4 passes to 1, writes no output twice).  `unsupported`: a matmul needing more elements per PE than built,
    a dtype the PEs do not carry (D-T62), a transpose of more elements than the rows fetch (D-T40 (1):
    xpose_rounds of a `cols`-column array)."""

    def __init__(self, cfg: Config, index: int = 0):
        """`index`: under row tiles (D-T100) the tile whose entry it feeds, launching the matmuls whose
        stream enters there (a transpose's at row 0); every tile's unit keeps the one rhythm."""
        self.gen, self.rows, self.pack, self.L, self.dtypes = cfg.generation, cfg.rows, cfg.pack, cfg.sbuf_latency, \
            cfg.dtypes
        self.tile, self.index = cfg.tile, index
        self.rounds = xpose_rounds(cfg.rows, cfg.cols)
        super().__init__({
            "issue": In(issue_link()), "now": In(T),
            "feed": Out(row_feed(self.rounds)), "advance": Out(1), "phase": Out(2), "first_cycle": Out(1),
            "unsupported": Out(UNSUPPORTED),
        })

    @property
    def module_name(self) -> str:
        tiles = f"_t{self.tile}i{self.index}" if self.tile < self.rows else ""
        return (f"tensore_launch_{self.gen.name.lower()}_r{self.rows}_p{self.pack}_l{self.L}_x{self.rounds}"
                f"{dtypes_suffix(self.dtypes)}{tiles}")

    def elaborate(self, platform):
        m = Module()
        now, maverick = self.now, Const(int(self.gen.layout == Gen.MAVERICK), 1)
        mm_go, mu = self._start(m, maverick)
        mine = mm_go            # a matmul of this unit's starts now (row tiles: its stream enters here)
        if self.tile < self.rows:
            entry, _ = tile_stream(mu.row0, mu.rows, mu.xpose, self.rows, self.tile, Mux)
            mine = wire(m, mm_go & (entry == self.index * self.tile), "mm_go_mine")
        mm, active, v_reg = Signal(uop_layout()), Signal(), Signal(32)
        t_ref, passes = Signal(T), Signal(uop_layout()["passes"].shape, init=1)      # the issue cycle and passes of the current rhythm
        with m.If(mm_go):
            m.d.sync += [t_ref.eq(now), passes.eq(mu.passes)]
        tref = wire(m, Mux(mm_go, now, t_ref), "tref")
        P = wire(m, Mux(mm_go, mu.passes, passes), "passes")
        ph_req = (now[:2] - tref[:2])[:2]          # phases are mod 4: low bits only
        req_shift = wire(m, (P == 1) | (ph_req == 0), "req_shift")   # the request chain moves at the end of this cycle
        launch = wire(m, mine | (active & req_shift), "launch")
        mmv = wire(m, Mux(mine, mu.as_value(), mm.as_value()), "mm_cur", uop_layout())
        v = wire(m, Mux(mine, 0, v_reg), "mm_vector")
        with m.If(mine):
            m.d.sync += [mm.eq(mu), active.eq(mu.vectors > 1), v_reg.eq(1)]
        with m.Elif(launch):
            m.d.sync += v_reg.eq(v_reg + 1)
            with m.If(v_reg + 1 >= mm.vectors):
                m.d.sync += active.eq(0)
        # array rhythm: t_data = t_ref + L
        ph = wire(m, (now[:2] - tref[:2] - self.L)[:2], "phase")
        advanced = Signal()           # the array advanced at the end of the last cycle: new column outputs
        m.d.sync += advanced.eq(self.advance)
        m.d.comb += [self.feed.req_shift.eq(req_shift), self.advance.eq((P == 1) | (ph == P - 1)),
                     self.phase.eq(Mux(P == 1, 0, ph)), self.first_cycle.eq(advanced)]
        self._record(m, mine, mu, mmv, v, launch)

        mav_seed = (mu.seed != 0) & maverick
        missing = ~any_of([mu.dtype == int(x) for x in self.dtypes]) if self.dtypes is not None else Const(0)
        m.d.comb += [self.unsupported.pack.eq(mine & ~mu.xpose & (mu.pack > self.pack)),
                     self.unsupported.dtype.eq(mine & ~mu.xpose & missing),
                     # a transpose's row c carries element c of each partition
                     self.unsupported.xpose_rows.eq(mine & mu.xpose & ~mav_seed & (mu.cols > self.rounds * self.rows))]
        return m

    def _start(self, m, maverick):
        """(go, micro-op): a matmul issued now, or a PeManageSeed's transpose in its cycle."""
        u, now, issue = self.issue.uop, self.now, self.issue.valid
        pending, at, seed_u = Signal(), Signal(T), Signal(uop_layout())
        with m.If(issue & (u.kind == Kind.SEED)):
            m.d.sync += [pending.eq(1), at.eq(self.issue.seed_at), seed_u.eq(u)]
        seed_launch = wire(m, pending & (now == at), "seed_launch")
        with m.If(seed_launch):
            m.d.sync += pending.eq(0)
        go = wire(m, (issue & (u.kind == Kind.MATMUL) & u.supported) | seed_launch, "mm_go")
        return go, wire(m, Mux(seed_launch, seed_u.as_value(), u.as_value()), "mm_start", uop_layout())

    def _record(self, m, go, mu, mmv, v, launch):
        """Vector v's launch record: its source offsets (pack 2: two elements), its destination, MX
        addressing, and row 0's transpose iterator."""
        src = PatternIter(m, "src", go, mu.src_off, mmv.src_num, mmv.src_step, mmv.esize, 18)
        i1, o1 = src.step(src.i, src.o)
        i2, o2 = src.step(i1, o1)
        two = mmv.pack == 2
        src.commit(launch, [Mux(two, a, b) for a, b in zip(i2, i1)], [Mux(two, a, b) for a, b in zip(o2, o1)])
        off0 = wire(m, src.offset(src.o), "src_off0")
        dsize = wire(m, Mux(mmv.out_bf16, 2, 4), "dst_esize")     # one element per vector
        dst = PatternIter(m, "dst", go, mu.dst_off, mmv.dst_num, mmv.dst_step, dsize, 14)
        dn_i, dn_o = dst.step(dst.i, dst.o)
        dst.commit(launch, dn_i, dn_o)
        dst_off = wire(m, dst.offset(dst.o), "dst_off")
        # MX: vector v's pack elements are indices e0(v) + j * apart of the data pattern (D-T25 order); e0
        # advances by pack (normal), 1 (interleave) or 1 within a tile of t = min(32, vectors) vectors
        # (tiled); the moving port maps an index to its address (rtl/mx.py MAP_FIELDS)
        e0_reg, vt_reg = Signal(16), Signal(6)
        e0, vt = wire(m, Mux(go, 0, e0_reg), "mx_e0_cur"), wire(m, Mux(go, 0, vt_reg), "mx_vt_cur")
        t_mx = wire(m, tile(mmv.vectors), "mx_tile")
        packed, inter = mmv.mxmode == MxOrder.PACKED, mmv.mxmode == MxOrder.INTERLEAVE
        wrap = wire(m, (mmv.mxmode == MxOrder.TILED) & (vt + 1 == t_mx), "mx_wrap")
        with m.If(launch):
            m.d.sync += [e0_reg.eq(e0 + Mux(packed, mmv.pack, Mux(wrap, t_mx * mmv.pack - t_mx + 1, 1))),
                         vt_reg.eq(Mux(wrap, 0, vt + 1))]
        units = Mux(mmv.nib, Cat(Const(0, 1), mmv.src_off), mmv.src_off)      # byte or nibble addresses
        apart = wire(m, Mux(packed, 1, Mux(inter, mmv.vectors[:16], t_mx)), "mx_apart", 16)
        emap = map_of(mmv.src_num, mmv.src_step)

        r, xp = self.feed.rec, mmv.xpose
        m.d.comb += [
            r.valid.eq(launch), r.swap.eq((v == 0) & ~xp), r.row0.eq(Mux(xp, 0, mmv.row0)),
            r.rows.eq(Mux(xp, mmv.cols, mmv.rows)), r.col0.eq(mmv.col0), r.cols.eq(mmv.cols),
            r.dtype.eq(mmv.dtype), r.fp32_mode.eq(mmv.fp32_mode), r.multi.eq((mmv.pack > 1) & ~xp),
            r.mx.eq(mmv.mx & ~xp), r.pack.eq(Mux(xp, 1, mmv.pack)), r.maddr.eq(units), r.melem.eq(e0),
            r.mstride.eq(apart), *[r[f].eq(x) for f, x in emap.items()], r.nib.eq(mmv.nib), r.scv.eq(mmv.sc_valid),
            r.spart.eq(mmv.sc_part), r.soff.eq(mmv.sc_off + v),
            r.part.eq(mmv.src_part + Mux(xp, v, 0)), r.off0.eq(off0), r.off1.eq(src.offset(o1)),
            r.esize.eq(mmv.esize), r.dst_part.eq(mmv.dst_part), r.dst_off.eq(dst_off),
            r.dst_slot1.eq(Mux(mmv.seed != 0, dst.base + dn_o[0] + dn_o[1] + dn_o[2],     # element 1
                               dst_off + mmv.dst_step[2] * dsize)),
            r.out_bf16.eq(mmv.out_bf16),
            r.accumulate.eq(mmv.accumulate), r.zero.eq(mmv.zero & (v == 0)),
            r.zero_log2.eq(mmv.zero_log2), r.c256.eq(mmv.c256), r.fresh.eq(1),
            r.fmaps.eq(mmv.fmaps), r.fstride.eq(mmv.fstride * mmv.esize), r.lut.eq(mmv.lut),
            r.xpose.eq(xp), r.seed.eq(mmv.seed), r.vidx.eq(v),
        ]
        self._xit(m, mmv, src.base)

    def _xit(self, m, mmv, base):
        """Row 0's transpose iterators: element 0, and element j * R (j < rounds) as (i, o), o in
        bytes (nibbles for 4-bit elements, then one unit per element)."""
        x = self.feed.xit
        esize = Mux(mmv.nib, 1, mmv.esize)
        m.d.comb += [x.base.eq(base), x.esize.eq(esize)]
        m.d.comb += [x.num[d].eq(mmv.src_num[d]) for d in range(3)] + [x.step[d].eq(mmv.src_step[d]) for d in range(3)]
        n0, n1 = [Mux(mmv.src_num[d] == 0, 1, mmv.src_num[d]) for d in range(2)]     # (0: no micro-op)
        for j in range(1, self.rounds):
            e = Const(j * self.rows, 9)
            q = wire(m, e // n0, f"xit_q{j}", 9)
            i = [wire(m, v, f"xit_i{j}_{d}", 9) for d, v in enumerate((e % n0, q % n1, q // n1))]
            m.d.comb += [x.xi[j - 1][d].eq(i[d]) for d in range(3)]
            m.d.comb += [x.xo[j - 1][d].eq(i[d] * mmv.src_step[d] * esize) for d in range(3)]
