"""The arr_seq cluster sequencer (seed 000 section 10, SPEC section 8, docs/timing.md).

Descriptors enter the instruction FIFO (16 entries, 1 with queue_cfg.fifo_size_sel) on a valid /
ready stream.  The head is decoded and checked (rtl/decoder.py) in the first cycle it is at the
head: a refused descriptor is popped then and only the error status changes (SPEC D-23); a valid
one issues in the first later cycle that meets every dependency rule of docs/timing.md.  The rules
are kept as the cycle each resource frees (a timestamp scoreboard against the free-running cycle
counter), so the sequencer issues exactly when the golden model does.  Issued micro-ops are tracked
until their completion cycle (at most MAX_IN_FLIGHT, D-T38) for done_count, matmul_done_count and
set_event; the perf counters count at issue.  The register block is generated from the RDL map."""
from amaranth.hdl import Array, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tensore.model.arr_seq_regs import REGISTERS
from tensore.model.isa.enums import PeReg
from tensore.model.isa.layouts import EVENT_NONE, NUM_EVENTS
from tensore.model.timing import FIFO_DEPTH, MAX_IN_FLIGHT
from tensore.rtl.decoder import Decoder, Kind, MmKind, uop_layout
from tensore.rtl.regs import RegisterBlock, port_name

BANKS = ("weight_load", "matmul", "pe_regwrite")
COUNTERS = 49
T = 32          # timestamp width


class Sequencer(wiring.Component):
    def __init__(self, gen, rows: int, cols: int, sbuf_latency: int = 2):
        self.gen, self.rows, self.cols, self.L = gen, rows, cols, sbuf_latency
        super().__init__({
            "desc_valid": In(1), "desc_ready": Out(1), "desc_data": In(512),
            "bus_addr": In(12), "bus_wdata": In(32), "bus_we": In(1), "bus_rdata": Out(32),
            "event_set": In(NUM_EVENTS),                     # host-set event flags (one-cycle pulses)
            "now": Out(T),
            "issue": Out(1), "uop": Out(uop_layout()),       # the micro-op issued in this cycle
            "refuse": Out(1), "refuse_code": Out(8),
            "round_sr": Out(1), "bypass": Out(1),
            "reg_apply": In(1), "reg_value": In(32), "reg_index": In(8),   # a fetched PeRegWrite value
            "unsupported": Out(1),                           # sticky: a valid micro-op the RTL does not run
            "seed_mm_at": Out(T),                            # with issue of a PeManageSeed: its transpose's cycle
            "busy": Out(1), "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        R, C, L = self.rows, self.cols, self.L
        m.submodules.regs = regs = RegisterBlock(REGISTERS)
        m.submodules.dec = dec = Decoder(self.gen, R, C)
        m.d.comb += [regs.addr.eq(self.bus_addr), regs.wdata.eq(self.bus_wdata), regs.we.eq(self.bus_we),
                     self.bus_rdata.eq(regs.rdata)]

        def reg(name, field):
            return getattr(regs, f"{port_name(name)}__{field}")

        def hw(name, field, value, we=1):
            m.d.comb += [getattr(regs, f"hw__{port_name(name)}__{field}__we").eq(we),
                         getattr(regs, f"hw__{port_name(name)}__{field}__d").eq(value)]

        now = Signal(T)
        m.d.sync += now.eq(now + 1)
        m.d.comb += self.now.eq(now)

        # -- instruction FIFO -------------------------------------------------------------------------
        depth = max(FIFO_DEPTH.values())
        mem = Array(Signal(512, name=f"ififo{i}") for i in range(depth))
        rd, wr = Signal(range(depth)), Signal(range(depth))
        level = Signal(range(depth + 1))
        cap = Mux(reg("queue_cfg", "fifo_size_sel"), FIFO_DEPTH[1], FIFO_DEPTH[0])
        pop = Signal()
        push = Signal()
        m.d.comb += [self.desc_ready.eq(level < cap), push.eq(self.desc_valid & self.desc_ready)]
        with m.If(push):
            m.d.sync += [mem[wr].eq(self.desc_data), wr.eq(wr + 1)]
        with m.If(pop):
            m.d.sync += rd.eq(rd + 1)
        m.d.sync += level.eq(level + push - pop)
        hw("status", "ififo_level", level)
        m.d.comb += dec.desc.eq(mem[rd])

        # -- decode / hold / issue --------------------------------------------------------------------
        held = Signal()                       # the head was decoded valid and waits to issue
        cur = Signal(uop_layout())
        head = (level != 0) & ~held
        refuse = head & (dec.error != 0)
        m.d.comb += [self.refuse.eq(refuse), self.refuse_code.eq(dec.error)]
        with m.If(head & (dec.error == 0)):
            m.d.sync += [held.eq(1), cur.eq(dec.uop)]

        # scoreboard (docs/timing.md): the cycle each rule frees
        last_issue, any_issued = Signal(T), Signal()
        all_done_p1, barrier_p1 = Signal(T), Signal(T)         # all_complete + 1, barrier_complete + 1
        lw_port, mm_port, last_lw_p1 = Signal(T), Signal(T), Signal(T)
        mm_valid, mm_t_data, mm_passes, mm_done, mm_issue = Signal(), Signal(T), Signal(3), Signal(T), Signal(T)
        mm_kind = Signal(2)
        sparse_end = Signal(T)                                  # LdTags waits for the last sparse matmul
        flags = Signal(NUM_EVENTS)

        u = cur
        is_load, is_mm = u.kind == Kind.LOAD, u.kind == Kind.MATMUL
        serial = reg("queue_cfg", "disable_dependency_check") | u.barrier
        ok = Signal()
        dly = ~reg("arr_cluster_cfg", "en_inter_instr_dly") | ~any_issued | \
            (now >= last_issue + 1 + reg("arr_cluster_cfg", "inter_instr_dly_cnt"))
        swapped = ~mm_valid | (now + L >= mm_t_data + mm_passes * (R + C))
        mm_rules = (now >= mm_port) & (now >= last_lw_p1) & \
            (~mm_valid | ((mm_passes == u.passes) & (mm_kind == u.mmkind)) | (now > mm_done)) & \
            ~((u.passes > 1) & mm_valid & (now <= mm_done) & ((now - mm_issue)[:2] != 0))
        deps = Mux(serial, now >= all_done_p1,
                   Mux(is_load, (now >= lw_port) & swapped & (~u.tags | (now >= sparse_end)), Mux(is_mm, mm_rules, 1)))
        we = u.wait_event
        event_ok = (we == EVENT_NONE) | flags.bit_select(we[:6], 1)

        # in-flight tracker
        slots = MAX_IN_FLIGHT
        s_valid = Signal(slots)
        s_done = Array(Signal(T, name=f"done{i}") for i in range(slots))
        s_mmdone = Array(Signal(T, name=f"mmdone{i}") for i in range(slots))
        s_mm = Signal(slots)
        s_event = Array(Signal(8, name=f"ev{i}") for i in range(slots))
        free = ~s_valid
        free_idx = Signal(range(slots))
        for i in reversed(range(slots)):
            with m.If(free[i]):
                m.d.comb += free_idx.eq(i)
        m.d.comb += ok.eq(held & dly & (now >= barrier_p1) & deps & event_ok & (free != 0))
        issue = ok
        m.d.comb += [self.issue.eq(issue), self.uop.eq(u), pop.eq(refuse | issue)]

        # completion cycle of the issued micro-op
        P = u.passes
        first_write = now + L + Mux(P == 4, (R + u.col0) << 2, R + u.col0) + 1
        last_write = now + L + Mux(P == 4, (u.vectors - 1 + R + u.col0 + u.cols - 1) << 2,
                                   u.vectors - 1 + R + u.col0 + u.cols - 1) + 1
        t_complete = Signal(T)
        t_mmdone = Signal(T)
        t_seed_mm = Signal(T)                          # PeManageSeed: its transpose's issue cycle
        m.d.comb += [t_seed_mm.eq(now + u.rows + L), self.seed_mm_at.eq(t_seed_mm)]
        with m.Switch(u.kind):
            with m.Case(Kind.LOAD):
                m.d.comb += t_complete.eq(now + u.rows - 1 + L)
            with m.Case(Kind.MATMUL):
                m.d.comb += [t_complete.eq(last_write),
                             t_mmdone.eq(Mux(reg("arr_cluster_cfg", "matmul_done_last"), last_write, first_write))]
            with m.Case(Kind.REGWRITE):
                m.d.comb += t_complete.eq(Mux(reg("queue_cfg", "bypass_peregwrite_instr"), now, now + L))
            with m.Case(Kind.LUT):
                m.d.comb += t_complete.eq(now + L)
            with m.Case(Kind.SEED):                    # identity rows, then 16 vectors at t_seed_mm
                m.d.comb += t_complete.eq(t_seed_mm + L + 16 - 1 + R + u.cols - 1 + 1)
            with m.Default():
                m.d.comb += t_complete.eq(now)

        unsupported = Signal()
        m.d.comb += self.unsupported.eq(unsupported)
        with m.If(issue):
            m.d.sync += [held.eq(0), last_issue.eq(now), any_issued.eq(1),
                         all_done_p1.eq(Mux(t_complete + 1 > all_done_p1, t_complete + 1, all_done_p1))]
            with m.If(u.barrier):
                m.d.sync += barrier_p1.eq(t_complete + 1)
            with m.If(is_load):
                m.d.sync += [lw_port.eq(now + u.rows), last_lw_p1.eq(now + 1)]
            with m.If(u.kind == Kind.SEED):
                m.d.sync += [lw_port.eq(now + u.rows), last_lw_p1.eq(now + 1), mm_port.eq(t_seed_mm + 16),
                             mm_valid.eq(1), mm_t_data.eq(t_seed_mm + L), mm_passes.eq(1), mm_done.eq(t_complete),
                             mm_issue.eq(t_seed_mm), mm_kind.eq(MmKind.XPOSE)]
            with m.If(is_mm):
                m.d.sync += [mm_port.eq(now + Mux(P == 4, u.vectors << 2, u.vectors)), mm_valid.eq(1),
                             mm_t_data.eq(now + L), mm_passes.eq(P), mm_done.eq(t_complete), mm_issue.eq(now),
                             mm_kind.eq(u.mmkind)]
                with m.If(u.mmkind == MmKind.SPARSE):
                    m.d.sync += sparse_end.eq(now + u.vectors + C)
            with m.If(~u.supported):
                m.d.sync += unsupported.eq(1)

        # tracker: insert, retire
        fire = Signal(slots)
        mmfire = Signal(slots)
        for i in range(slots):
            m.d.comb += [fire[i].eq(s_valid[i] & (s_done[i] == now)),
                         mmfire[i].eq(s_valid[i] & s_mm[i] & (s_mmdone[i] == now))]
        now_done = issue & (t_complete == now)          # completes in its issue cycle (bypassed PeRegWrite)
        set_now = Signal(NUM_EVENTS)
        sets = [Mux(now_done & (u.set_event != EVENT_NONE), Const(1, NUM_EVENTS) << u.set_event[:6], 0)]
        sets += [Mux(fire[i] & (s_event[i] != EVENT_NONE), Const(1, NUM_EVENTS) << s_event[i][:6], 0)
                 for i in range(slots)]
        acc = Const(0, NUM_EVENTS)
        for x in sets:
            acc = acc | x
        m.d.comb += set_now.eq(acc)
        consume = Signal(NUM_EVENTS)
        with m.If(issue & (we != EVENT_NONE)):
            m.d.comb += consume.eq(1 << we[:6])
        m.d.sync += flags.eq((flags & ~consume) | set_now | self.event_set)
        new_valid = Signal(slots)
        m.d.comb += new_valid.eq(s_valid & ~fire)
        with m.If(issue & ~now_done):
            m.d.sync += [s_done[free_idx].eq(t_complete), s_mmdone[free_idx].eq(t_mmdone),
                         s_event[free_idx].eq(u.set_event)]
            m.d.sync += [s_valid.eq(new_valid | (1 << free_idx)),     # seed micro-ops raise no matmul_done
                         s_mm.eq((s_mm & ~(1 << free_idx)) | ((is_mm & (u.seed == 0)) << free_idx))]
        with m.Else():
            m.d.sync += s_valid.eq(new_valid)
        m.d.comb += self.busy.eq((s_valid != 0) | (level != 0))
        hw("status", "busy", self.busy)

        def popcount(bits):
            return sum((bits[i] for i in range(len(bits))), Const(0, 5))
        hw("done_count", "count", reg("done_count", "count") + popcount(fire) + now_done, (fire != 0) | now_done)
        hw("matmul_done_count", "count", reg("matmul_done_count", "count") + popcount(mmfire), mmfire != 0)

        # error status (SPEC section 9): sticky bit, first code and opcode, count
        reg_bad = Signal()
        bad = refuse | reg_bad
        code = Mux(refuse, dec.error, 0x10)
        opcode = Mux(refuse, dec.desc[:8], 0x03)
        first_err = bad & ~reg("err_status", "err")
        hw("err_status", "err", 1, bad)
        hw("err_status", "err_code", code, first_err)
        hw("err_status", "err_opcode", opcode, first_err)
        hw("err_count", "count", reg("err_count", "count") + 1, bad)
        m.d.comb += self.error.eq(reg("err_status", "err"))

        # PeRegWrite: PSUM_ROUND (immediate with bypass, else the fetched SBUF word at t + L)
        round_sr = Signal()
        m.d.comb += [self.round_sr.eq(round_sr), self.bypass.eq(reg("queue_cfg", "bypass_peregwrite_instr"))]
        with m.If(issue & (u.kind == Kind.REGWRITE) & self.bypass & (u.reg == PeReg.PSUM_ROUND)):
            m.d.sync += round_sr.eq(u.value[0])
        with m.If(self.reg_apply & (self.reg_index == PeReg.PSUM_ROUND)):
            with m.If(self.reg_value < 2):
                m.d.sync += round_sr.eq(self.reg_value[0])
            with m.Else():
                m.d.comb += reg_bad.eq(1)

        # perf counters: 3 banks x 49 64-bit counters, counted at issue when cntr_en
        rst = getattr(regs, "perf_cntr_cfg__cntr_rst__pulse")
        bank_of = {0: Kind.LOAD, 1: Kind.MATMUL, 2: Kind.REGWRITE}
        for b, bank in enumerate(BANKS):
            for i in range(COUNTERS):
                lsb, msb = f"{bank}[{i}].instr_cnt_lsb", f"{bank}[{i}].instr_cnt_msb"
                kind_hit = (u.kind == bank_of[b]) | ((u.kind == Kind.SEED) & (b < 2))   # PeManageSeed: load + matmul
                hit = issue & reg("perf_cntr_cfg", "cntr_en") & kind_hit & (u.counter == i) & u.supported
                lo = reg(lsb, "value")
                wrap = lo == 0xFFFF_FFFF
                hw(lsb, "value", Mux(rst, 0, lo + 1), rst | hit)
                hw(msb, "value", Mux(rst, 0, reg(msb, "value") + 1), rst | (hit & wrap))
        return m
