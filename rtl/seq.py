"""The arr_seq cluster sequencer (seed 000 section 10, SPEC section 8, docs/timing.md).

Descriptors enter the instruction FIFO (16 entries, 1 with queue_cfg.fifo_size_sel; an
`amaranth.lib.fifo.SyncFIFO` whose write side the register caps) on a valid / ready stream.  The
head is decoded and checked (rtl/decoder.py, with rtl/weight_state.py for the matmul-time rules of
D-T31) in the first cycle it is at the head: a refused descriptor is popped then and only the error
status changes (SPEC D-23); a valid one issues in the first later cycle that meets every dependency
rule of docs/timing.md.  The rules are kept as the cycle each resource frees (a timestamp scoreboard
against the free-running cycle counter), computed by model.timing's formulas, so the sequencer issues
exactly when the golden model does.  Issued micro-ops are tracked until their completion cycle (at
most MAX_IN_FLIGHT, D-T38) for done_count, matmul_done_count and set_event; the perf counters count
at issue.  The register block is generated from the RDL map."""
from amaranth.hdl import Array, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out
from tensore.model.arr_seq_regs import REGISTERS
from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa.enums import ErrorCode, Opcode, PeReg
from tensore.model.isa.layouts import EVENT_NONE, NUM_EVENTS
from tensore.model.isa.microop import PERF_BANKS_OF, SEED_STATES
from tensore.model.timing import (
    DEFAULT_PROFILE,
    FIFO_DEPTH,
    MAX_IN_FLIGHT,
    PERF_BANKS,
    PERF_COUNTERS,
    blocks_overlap,
    boxes_overlap,
    column_load,
    column_load_end,
    column_load_issue,
    column_port_free,
    column_port_next,
    entry_free,
    floor_cycles,
    in_rhythm,
    load_complete,
    load_front_issue,
    load_port_free,
    mm_port_free,
    psum_box,
    seed_transpose_issue,
    sparse_end,
    tap_of,
    tile_stream,
    times_passes,
    weights_swapped,
    write_cycle,
    write_lead,
)
from tensore.rtl.blackbox import prototype
from tensore.rtl.config import Config
from tensore.rtl.decoder import Decoder
from tensore.rtl.isa import Kind, MmKind, hw_member, uop_layout
from tensore.rtl.links import DESCRIPTOR_STREAM, REG_FETCH, REGISTER_BUS, T, issue_link
from tensore.rtl.regs import RegisterBlock, port_name
from tensore.rtl.weight_state import WeightState

class Sequencer(wiring.Component):
    def __init__(self, cfg: Config, *, black_box: bool = False):
        """`black_box`: the weight state's rows are instances of their exported module.  The build's
        timing profile (rtl/config.py) gives the issue rules (model/timing.py PROFILES, D-T98), the
        golden engine's."""
        self.cfg, self.black_box = cfg, black_box
        self.gen, self.rows, self.cols, self.L = cfg.generation, cfg.rows, cfg.cols, cfg.sbuf_latency
        self.timing = cfg.profile
        super().__init__({
            "desc": In(DESCRIPTOR_STREAM), "bus": In(REGISTER_BUS),
            "event_set": In(NUM_EVENTS),                     # host-set event flags (one-cycle pulses)
            "now": Out(T),
            "issue": Out(issue_link()),                      # the micro-op issued in this cycle (rtl/links.py)
            "refuse": Out(1), "refuse_code": Out(8),
            "round_sr": Out(1),
            "reg": In(REG_FETCH),                            # a fetched PeRegWrite value
            "unsupported": Out(1),                           # sticky: a valid micro-op the RTL does not run
            "busy": Out(1), "error": Out(1),
        })

    export_apart = True        # a large conversion: rtl/export.py converts it in a second process (D-T82)

    @property
    def module_name(self) -> str:
        tp = "" if self.timing.name == DEFAULT_PROFILE else f"_t{self.timing.name}"     # its issue rules (D-T98)
        return f"tensore_sequencer_{Gen.parse(self.gen).name.lower()}_r{self.rows}_c{self.cols}_l{self.L}{tp}"

    def blocks(self) -> list:
        """The separately exported blocks it instantiates."""
        return prototype(WeightState(self.rows, self.cols)).blocks()

    def elaborate(self, platform):
        m = self._m = Module()
        m.submodules.regs = self._regs = regs = RegisterBlock(REGISTERS)
        m.submodules.dec = dec = Decoder(self.cfg)
        m.d.comb += [regs.addr.eq(self.bus.addr), regs.wdata.eq(self.bus.wdata), regs.we.eq(self.bus.we),
                     self.bus.rdata.eq(regs.rdata)]
        now = Signal(T)
        m.d.sync += now.eq(now + 1)
        m.d.comb += self.now.eq(now)
        level, pop = self._fifo(dec)
        self._flags, self._reg_bad = Signal(NUM_EVENTS), Signal()     # event flags; a bad fetched PeRegWrite

        held = Signal()                       # the head was decoded valid and waits to issue
        cur = Signal(uop_layout())
        head = (level != 0) & ~held
        refuse = head & (dec.error != 0)
        m.d.comb += [self.refuse.eq(refuse), self.refuse_code.eq(dec.error)]
        with m.If(head & (dec.error == 0)):
            m.d.sync += [held.eq(1), cur.eq(dec.uop)]
        self._weight_state(dec, cur)

        issue = Signal()
        t_complete, t_mmdone, ready = self._scoreboard(now, cur, issue)
        free = self._tracker(now, cur, issue, t_complete, t_mmdone, level)
        m.d.comb += [issue.eq(held & ready & (free != 0)), self.issue.uop.eq(cur), self.issue.valid.eq(issue),
                     pop.eq(refuse | issue)]
        unsupported = Signal()
        m.d.comb += self.unsupported.eq(unsupported)
        with m.If(issue):
            m.d.sync += held.eq(0)
            with m.If(~cur.supported):
                m.d.sync += unsupported.eq(1)
        self._errors(dec, refuse)
        self._regwrite(cur, issue)
        self._perf(cur, issue)
        return m

    # -- registers --------------------------------------------------------------------------------
    def _reg(self, name, field):
        return getattr(self._regs, f"{port_name(name)}__{field}")

    def _hw(self, name, field, value, we=1):
        self._m.d.comb += [getattr(self._regs, f"hw__{port_name(name)}__{field}__we").eq(we),
                           getattr(self._regs, f"hw__{port_name(name)}__{field}__d").eq(value)]

    # -- instruction FIFO ---------------------------------------------------------------------------
    def _fifo(self, dec):
        """A 16-entry SyncFIFO (first word falls through to the decoder); queue_cfg caps its fill."""
        m = self._m
        m.submodules.ififo = fifo = SyncFIFO(width=512, depth=max(FIFO_DEPTH.values()))
        cap = Mux(self._reg("queue_cfg", "fifo_size_sel"), FIFO_DEPTH[1], FIFO_DEPTH[0])
        pop = Signal()
        desc = self.desc
        m.d.comb += [desc.ready.eq(fifo.w_rdy & (fifo.level < cap)), fifo.w_en.eq(desc.valid & desc.ready),
                     fifo.w_data.eq(desc.data), fifo.r_en.eq(pop), dec.desc.eq(fifo.r_data)]
        self._hw("status", "ififo_level", fifo.level)
        return fifo.level, pop

    def _weight_state(self, dec, cur):
        """The loaded weights' fp32 class and pack per PE, asked about the head's block (D-T31)."""
        m = self._m
        m.submodules.weights = ws = WeightState(self.rows, self.cols, self.black_box)
        lut_fp32 = Signal()                   # the ConvLutLoad table's entry dtype is FP32
        issue = self.issue.valid
        with m.If(issue & (cur.kind == Kind.LUT)):
            m.d.sync += lut_fp32.eq(cur.dtype == Dtype.FP32)
        h = dec.uop
        m.d.comb += [ws.load.eq(issue & (((cur.kind == Kind.LOAD) & ~cur.tags) | (cur.kind == Kind.SEED))),
                     ws.fp32.eq(Mux(cur.lut, lut_fp32, cur.dtype == Dtype.FP32)), ws.pack.eq(cur.pack),
                     ws.q_fp32.eq(h.dtype == Dtype.FP32), ws.q_pack.eq(h.pack),
                     dec.wt_mix.eq(ws.mix), dec.wt_pump.eq(ws.pump)]
        for name in ("row0", "rows", "col0", "cols"):
            m.d.comb += [getattr(ws.block, name).eq(getattr(cur, name)), getattr(ws.query, name).eq(getattr(h, name))]

    # -- dependency rules (docs/timing.md) ------------------------------------------------------------
    def _scoreboard(self, now, u, issue):
        """The cycle each rule frees, and the held micro-op's completion: (t_complete, t_mmdone, ready)."""
        m, R, C, L, reg = self._m, self.rows, self.cols, self.L, self._reg
        last_issue, any_issued = Signal(T), Signal()
        all_done_p1, barrier_p1 = Signal(T), Signal(T)         # all_complete + 1, barrier_complete + 1
        lw_port, mm_port, last_lw_p1 = Signal(T), Signal(T), Signal(T)
        lw_end, lw_skew = Signal(T), Signal(3)                   # a column-serial load's end, skew (0: row-serial)
        lw_row0, lw_rows = Signal.like(u.row0, name="lw_row0"), Signal.like(u.rows, name="lw_rows")   # its rows
        mm_valid, mm_t_data, mm_passes, mm_done, mm_issue = Signal(), Signal(T), Signal(uop_layout()["passes"].shape), \
            Signal(T), Signal(T)
        mm_kind = Signal(MmKind)
        sparse_at = Signal(T)                                   # LdTags waits for the last sparse matmul
        is_load, is_mm = u.kind == Kind.LOAD, u.kind == Kind.MATMUL
        serial = reg("queue_cfg", "disable_dependency_check") | u.barrier
        dly = ~reg("arr_cluster_cfg", "en_inter_instr_dly") | ~any_issued | \
            (now >= last_issue + 1 + reg("arr_cluster_cfg", "inter_instr_dly_cnt"))
        tiles = self._row_tiles(u) if self.timing.row_tiles else None
        swapped = ~mm_valid | (now + L >= weights_swapped(mm_t_data, mm_passes, R, C))
        if tiles:
            swapped = tiles.fronts(lambda t, p, lead: now + L + lead >= weights_swapped(t, p, R, C))
        if self.timing.row_wavefront:           # a weight load follows the swap front row by row (D-T98)
            front = ~mm_valid | (now >= load_front_issue(mm_t_data, mm_passes, u.row0, u.rows, C, L))
            if tiles:
                front = tiles.fronts(lambda t, p, lead: now + lead >= load_front_issue(t, p, u.row0, u.rows, C, L))
            swapped = Mux(u.tags, swapped, front)
        load_rules = (now >= lw_end) & swapped
        after_lw = now >= last_lw_p1
        skew = Mux(mm_valid, mm_passes, 1)
        m.d.comb += self.issue.skew4.eq(skew == 4)
        if self.timing.column_loads:            # the column-serial port (D-T99)
            column = column_load(u.tags, u.tagw, u.xpose, u.mx, u.lut, u.lcf)
            col_front = ~mm_valid | (now >= column_load_issue(mm_t_data, mm_passes, u.row0, u.col0, u.cols, L))
            if tiles:
                col_front = tiles.fronts(
                    lambda t, p, lead: now + lead >= column_load_issue(t, mm_passes, u.row0, u.col0, u.cols, L))
            port = column_port_next(lw_port, lw_end, lw_skew, lw_row0, lw_rows, u.row0, Mux)
            load_rules = Mux(column, (now >= port) & col_front, load_rules)
            after_lw = Mux((lw_skew == 0) | (lw_skew == u.passes), after_lw, now >= lw_end)
        mm_rules = (tiles.ports(now) & tiles.write_order(now) if tiles else now >= mm_port) & after_lw & \
            (~mm_valid | ((mm_passes == u.passes) & (mm_kind == u.mmkind)) | (now > mm_done)) & \
            ~(mm_valid & (now <= mm_done) & ~in_rhythm(now, mm_issue, u.passes))
        if self.timing.issue_floor:             # the public issue floor on an overlapping block (D-T98)
            fl_valid, fl_at = Signal(), Signal(T)
            fl_block = [Signal.like(u.row0, name="fl_row0"), Signal.like(u.rows, name="fl_rows"),
                        Signal.like(u.col0, name="fl_col0"), Signal.like(u.cols, name="fl_cols")]
            mine = [u.row0, u.rows, u.col0, u.cols]
            mm_rules &= ~fl_valid | ~blocks_overlap(fl_block, mine) | (now >= fl_at)
        deps = Mux(serial, now >= all_done_p1,
                   Mux(is_load, load_rules & (~u.tags | (now >= sparse_at)), Mux(is_mm, mm_rules, 1)))
        we = u.wait_event
        event_ok = (we == EVENT_NONE) | self._flags.bit_select(we[:6], 1)
        ready = dly & (now >= barrier_p1) & deps & event_ok

        t_complete, t_mmdone, t_seed_mm = self._completion(now, u, skew, tiles)
        if tiles:
            tiles.update(now, issue, t_seed_mm)
            tiles.writes(now, issue, t_complete)
        mm_last = Mux(mm_valid & (mm_done > t_complete), mm_done, t_complete)   # every matmul's, drained
        with m.If(issue):
            m.d.sync += [last_issue.eq(now), any_issued.eq(1),
                         all_done_p1.eq(Mux(t_complete + 1 > all_done_p1, t_complete + 1, all_done_p1))]
            with m.If(u.barrier):
                m.d.sync += barrier_p1.eq(t_complete + 1)
            with m.If(is_load | (u.kind == Kind.SEED)):
                m.d.sync += [lw_port.eq(load_port_free(now, u.rows)), lw_end.eq(load_port_free(now, u.rows)),
                             lw_skew.eq(0), last_lw_p1.eq(now + 1)]
                if self.timing.column_loads:
                    with m.If(is_load & column):
                        m.d.sync += [lw_port.eq(column_port_free(now, skew, u.cols)),
                                     lw_end.eq(column_load_end(now, skew, u.rows, u.cols)), lw_skew.eq(skew),
                                     lw_row0.eq(u.row0), lw_rows.eq(u.rows)]
            with m.If(u.kind == Kind.SEED):
                m.d.sync += [mm_port.eq(mm_port_free(t_seed_mm, SEED_STATES, 1)), mm_valid.eq(1),
                             mm_t_data.eq(t_seed_mm + L), mm_passes.eq(1), mm_done.eq(mm_last),
                             mm_issue.eq(t_seed_mm), mm_kind.eq(MmKind.XPOSE)]
            if self.timing.issue_floor:
                with m.If(is_mm):
                    m.d.sync += [fl_valid.eq(1), *(a.eq(b) for a, b in zip(fl_block, mine)),
                                 fl_at.eq(now + floor_cycles(u.mmkind == MmKind.XPOSE, u.rows, u.cols, u.vectors,
                                                             u.passes, Mux))]
            with m.If(is_mm):
                m.d.sync += [mm_port.eq(mm_port_free(now, u.vectors, u.passes)), mm_valid.eq(1),
                             mm_t_data.eq(now + L), mm_passes.eq(u.passes), mm_done.eq(mm_last), mm_issue.eq(now),
                             mm_kind.eq(u.mmkind)]
                with m.If(u.mmkind == MmKind.SPARSE):
                    m.d.sync += sparse_at.eq(sparse_end(now, u.vectors, C))
        return t_complete, t_mmdone, ready

    def _completion(self, now, u, skew, tiles=None):
        """When the micro-op issued now completes (and raises matmul_done), by model.timing's formulas;
        `skew`: a column-serial load's row skew (the last matmul's passes); `tiles`: a matmul's sums
        leave at the tap below its span (_RowTiles)."""
        m, R, L, reg = self._m, self.rows, self.L, self._reg
        S = tiles.span if tiles else R
        first_write = write_cycle(now + L, S, u.passes, u.col0, 0)
        last_write = write_cycle(now + L, S, u.passes, u.col0 + u.cols - 1, u.vectors - 1)
        t_complete, t_mmdone, t_seed_mm = Signal(T), Signal(T), Signal(T)   # t_seed_mm: PeManageSeed's transpose
        m.d.comb += [t_seed_mm.eq(seed_transpose_issue(now, u.rows, L)), self.issue.seed_at.eq(t_seed_mm)]
        with m.Switch(u.kind):
            with m.Case(Kind.LOAD):
                m.d.comb += t_complete.eq(load_complete(now, u.rows, L))
                if self.timing.column_loads:    # its last write (docs/timing.md, 'Background loads')
                    with m.If(column_load(u.tags, u.tagw, u.xpose, u.mx, u.lut, u.lcf)):
                        m.d.comb += t_complete.eq(column_load_end(now, skew, u.rows, u.cols) - 1 + L)
            with m.Case(Kind.MATMUL):
                m.d.comb += [t_complete.eq(last_write),
                             t_mmdone.eq(Mux(reg("arr_cluster_cfg", "matmul_done_last"), last_write, first_write))]
            with m.Case(Kind.REGWRITE):
                m.d.comb += t_complete.eq(Mux(reg("queue_cfg", "bypass_peregwrite_instr"), now, now + L))
            with m.Case(Kind.LUT):
                m.d.comb += t_complete.eq(now + L)
            with m.Case(Kind.SEED):                    # identity rows, then SEED_STATES vectors at t_seed_mm
                m.d.comb += t_complete.eq(write_cycle(t_seed_mm + L, R, 1, u.cols - 1, SEED_STATES - 1))
            with m.Default():
                m.d.comb += t_complete.eq(now)
        return t_complete, t_mmdone, t_seed_mm

    def _row_tiles(self, u) -> "_RowTiles":
        half = self.cols // 2 if self.cfg.maverick else self.cols
        return _RowTiles(self._m, u, self.rows, self.cfg.tile, self.L, half)

    # -- in-flight micro-ops, events, done counters ----------------------------------------------------
    def _tracker(self, now, u, issue, t_complete, t_mmdone, level):
        """Issued micro-ops until their completion cycle (D-T38); returns the free-slot bits."""
        m = self._m
        slots = MAX_IN_FLIGHT
        s_valid, s_mm = Signal(slots), Signal(slots)
        s_done = Array(Signal(T, name=f"done{i}") for i in range(slots))
        s_mmdone = Array(Signal(T, name=f"mmdone{i}") for i in range(slots))
        s_event = Array(Signal(8, name=f"ev{i}") for i in range(slots))
        free = ~s_valid
        free_idx = Signal(range(slots))
        for i in reversed(range(slots)):
            with m.If(free[i]):
                m.d.comb += free_idx.eq(i)
        fire, mmfire = Signal(slots), Signal(slots)
        for i in range(slots):
            m.d.comb += [fire[i].eq(s_valid[i] & (s_done[i] == now)),
                         mmfire[i].eq(s_valid[i] & s_mm[i] & (s_mmdone[i] == now))]
        now_done = issue & (t_complete == now)          # completes in its issue cycle (bypassed PeRegWrite)
        sets = [Mux(now_done & (u.set_event != EVENT_NONE), Const(1, NUM_EVENTS) << u.set_event[:6], 0)]
        sets += [Mux(fire[i] & (s_event[i] != EVENT_NONE), Const(1, NUM_EVENTS) << s_event[i][:6], 0)
                 for i in range(slots)]
        set_now, consume = Signal(NUM_EVENTS), Signal(NUM_EVENTS)
        m.d.comb += set_now.eq(_or_all(sets, NUM_EVENTS))
        with m.If(issue & (u.wait_event != EVENT_NONE)):
            m.d.comb += consume.eq(1 << u.wait_event[:6])
        m.d.sync += self._flags.eq((self._flags & ~consume) | set_now | self.event_set)
        new_valid = Signal(slots)
        m.d.comb += new_valid.eq(s_valid & ~fire)
        with m.If(issue & ~now_done):
            m.d.sync += [s_done[free_idx].eq(t_complete), s_mmdone[free_idx].eq(t_mmdone),
                         s_event[free_idx].eq(u.set_event)]
            m.d.sync += [s_valid.eq(new_valid | (1 << free_idx)),     # seed micro-ops raise no matmul_done
                         s_mm.eq((s_mm & ~(1 << free_idx)) | (((u.kind == Kind.MATMUL) & (u.seed == 0)) << free_idx))]
        with m.Else():
            m.d.sync += s_valid.eq(new_valid)
        m.d.comb += self.busy.eq((s_valid != 0) | (level != 0))
        self._hw("status", "busy", self.busy)
        done = self._reg("done_count", "count")
        self._hw("done_count", "count", done + _popcount(fire) + now_done, (fire != 0) | now_done)
        mm_done = self._reg("matmul_done_count", "count")
        self._hw("matmul_done_count", "count", mm_done + _popcount(mmfire), mmfire != 0)
        return free

    # -- error status, PeRegWrite, perf counters ----------------------------------------------------------
    def _errors(self, dec, refuse):
        """SPEC section 9: sticky bit, first code and opcode, count (a refused descriptor, or a
        PeRegWrite whose fetched value is not a PSUM_ROUND value, D-T38 (6))."""
        bad = refuse | self._reg_bad
        code = Mux(refuse, dec.error, ErrorCode.BAD_REGISTER)
        opcode = Mux(refuse, dec.desc[:8], Opcode.PE_REG_WRITE)
        first_err = bad & ~self._reg("err_status", "err")
        self._hw("err_status", "err", 1, bad)
        self._hw("err_status", "err_code", code, first_err)
        self._hw("err_status", "err_opcode", opcode, first_err)
        self._hw("err_count", "count", self._reg("err_count", "count") + refuse + self._reg_bad, bad)   # both in one cycle: 2
        self._m.d.comb += self.error.eq(self._reg("err_status", "err"))

    def _regwrite(self, u, issue):
        """PSUM_ROUND: the immediate with bypass, else the SBUF word fetched at t + L."""
        m = self._m
        round_sr = Signal()
        bypass, fetched = self.issue.bypass, self.reg
        m.d.comb += [self.round_sr.eq(round_sr), bypass.eq(self._reg("queue_cfg", "bypass_peregwrite_instr"))]
        with m.If(issue & (u.kind == Kind.REGWRITE) & bypass & (u.reg == PeReg.PSUM_ROUND)):
            m.d.sync += round_sr.eq(u.value[0])
        with m.If(fetched.apply & (fetched.index == PeReg.PSUM_ROUND)):
            with m.If(fetched.value < 2):
                m.d.sync += round_sr.eq(fetched.value[0])
            with m.Else():
                m.d.comb += self._reg_bad.eq(1)

    def _perf(self, u, issue):
        """PERF_BANKS x PERF_COUNTERS 64-bit counters, counted at issue when cntr_en (D-22, D-T30)."""
        rst = getattr(self._regs, f"{port_name('perf_cntr_cfg')}__cntr_rst__pulse")
        count = issue & self._reg("perf_cntr_cfg", "cntr_en") & u.supported
        for bank in PERF_BANKS:
            kind_hit = _or_all([u.kind == hw_member(k) for k, banks in PERF_BANKS_OF.items() if bank in banks], 1)
            for i in range(PERF_COUNTERS):
                lsb, msb = f"{bank}[{i}].instr_cnt_lsb", f"{bank}[{i}].instr_cnt_msb"
                hit = count & kind_hit & (u.counter == i)
                lo = self._reg(lsb, "value")
                wrap = lo == 0xFFFF_FFFF
                self._hw(lsb, "value", Mux(rst, 0, lo + 1), rst | hit)
                self._hw(msb, "value", Mux(rst, 0, self._reg(msb, "value") + 1), rst | (hit & wrap))


def _or_all(values, width):
    out = Const(0, width)
    for v in values:
        out = out | v
    return out


def _popcount(bits):
    return sum((bits[i] for i in range(len(bits))), Const(0, 5))


class _RowTiles:
    """The scoreboard of the row tiles side by side (D-T100, `public`; model/engine/issue.py
    _last_mm, _stream): per tile, the cycle its entry into the request chain frees (`port`) and its
    last matmul's t_data, entry row and passes, for the loads into it (their rules take the front
    t_data - passes x entry, ArrayTiming.front: `lead` is added to the cycle instead, so nothing
    goes below zero)."""

    def __init__(self, m, u, rows: int, tile: int, latency: int, half: int):
        self.m, self.u, self.R, self.tile, self.L = m, u, rows, tile, latency
        n = rows // tile
        self.port = [Signal(T, name=f"tile{i}_port") for i in range(n)]
        self.valid = [Signal(name=f"tile{i}_valid") for i in range(n)]
        self.t_data = [Signal(T, name=f"tile{i}_t_data") for i in range(n)]
        self.entries = [Signal.like(u.row0, name=f"tile{i}_entry") for i in range(n)]
        self.passes = [Signal(u.passes.shape(), name=f"tile{i}_passes") for i in range(n)]
        self.entry, self.span = tile_stream(u.row0, u.rows, u.xpose, rows, tile, Mux)     # the held micro-op's
        self.box = self._box_of(u, half)
        width = max(len(Value.cast(b)) for b in self.box) + 1
        self.w_valid = [Signal(name=f"tap{k}_w_valid") for k in range(n)]
        self.w_last = [Signal(T, name=f"tap{k}_w_last") for k in range(n)]
        self.w_box = [[Signal(signed(width), name=f"tap{k}_box{j}") for j in range(4)] for k in range(n)]
        self.tap = Signal(range(n), name="write_tap")       # the tap its sums leave at (a seed's: the bottom)
        seeded = u.seed | (u.kind == Kind.SEED)
        m.d.comb += self.tap.eq(Mux(seeded, n - 1, tap_of(self.entry, self.span, tile)))

    def _box_of(self, u, half: int):
        """The held matmul's PSUM box (timing.psum_box; every cell for a seed's), as model/engine/issue.py
        _psum_box."""
        cols = Mux(u.cols > half, half, u.cols)
        box = psum_box(u.dst_part, cols, u.dst_off, u.dst_step, u.dst_num, Mux(u.out_bf16, 2, 4), Mux)
        whole = u.seed | (u.kind != Kind.MATMUL)
        return [Mux(whole, w, b) for w, b in zip((0, 1 << 16, 0, 1 << 30), box)]

    def _crosses(self, i: int):
        return (self.entry <= i * self.tile) & (i * self.tile < self.entry + self.span)

    def _loads(self, i: int):
        """The held load writes rows of tile i."""
        u = self.u
        return (u.row0 < (i + 1) * self.tile) & (i * self.tile < u.row0 + u.rows)

    def fronts(self, rule):
        """`rule(t_data, passes, lead)` holds for the last matmul of every tile the held load writes
        (lead: passes x its entry row)."""
        ok = Const(1, 1)
        for i, (v, t, p, e) in enumerate(zip(self.valid, self.t_data, self.passes, self.entries)):
            ok = ok & (~self._loads(i) | ~v | rule(t, p, times_passes(e, p)))
        return ok

    def ports(self, now):
        """The held matmul's stream reaches each tile's entry no sooner than it frees."""
        ok = Const(1, 1)
        for i, port in enumerate(self.port):
            ok = ok & (~self._crosses(i) | (now + times_passes(i * self.tile - self.entry, self.u.passes) >= port))
        return ok

    def write_order(self, now):
        """The held matmul's first PSUM write follows the last write into its box of each tap below its own
        (model/engine/issue.py _write_order, D-T100); the top tap is below none."""
        u, ok = self.u, Const(1, 1)
        lead = write_lead(self.L, self.span, u.col0, u.passes)
        for k, (v, last, box) in list(enumerate(zip(self.w_valid, self.w_last, self.w_box)))[1:]:
            ok = ok & ((self.tap >= k) | ~v | ~boxes_overlap(box, self.box) | (now + lead > last))
        return ok

    def writes(self, now, issue, last):
        """A PSUM-writing micro-op's tap keeps its last write and box, the union with the tap's earlier
        ones still writing at its issue (model/engine/issue.py _tap_writes)."""
        m, u = self.m, self.u
        for k, (v, w_last, box) in enumerate(zip(self.w_valid, self.w_last, self.w_box)):
            keep = v & (w_last >= now)
            with m.If(issue & ((u.kind == Kind.MATMUL) | (u.kind == Kind.SEED)) & (self.tap == k)):
                m.d.sync += [v.eq(1), w_last.eq(Mux(keep & (w_last > last), w_last, last))]
                for j, (old, new) in enumerate(zip(box, self.box)):
                    wider = (old < new) if j % 2 == 0 else (old > new)        # lo: the smaller, end: the larger
                    m.d.sync += old.eq(Mux(keep & wider, old, new))

    def update(self, now, issue, t_seed_mm):
        """A matmul's stream holds the entries of the tiles it crosses; a PeManageSeed's transpose
        (SEED_STATES vectors from row 0, one pass) every tile's."""
        m, u, L = self.m, self.u, self.L
        port = mm_port_free(now, u.vectors, u.passes)
        seed_port = mm_port_free(t_seed_mm, SEED_STATES, 1)
        for i in range(len(self.port)):
            below = i * self.tile
            with m.If(issue & (u.kind == Kind.MATMUL) & self._crosses(i)):
                m.d.sync += [self.port[i].eq(entry_free(port, u.passes, below - self.entry)), self.valid[i].eq(1),
                             self.t_data[i].eq(now + L), self.entries[i].eq(self.entry), self.passes[i].eq(u.passes)]
            with m.If(issue & (u.kind == Kind.SEED)):
                m.d.sync += [self.port[i].eq(entry_free(seed_port, 1, below)), self.valid[i].eq(1),
                             self.t_data[i].eq(t_seed_mm + L), self.entries[i].eq(0), self.passes[i].eq(1)]
