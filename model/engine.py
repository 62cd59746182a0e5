"""The golden engine: runs a descriptor program against SBUF and PSUM, cycle-accurately.

The sequencer (seed 000 section 10, SPEC section 8) takes descriptors in order through the
instruction FIFO, decodes and checks each one (SPEC D-23), issues it when its dependencies allow
(docs/timing.md), and executes it: the values come from model.array / model.psum, the cycles from
model.timing.  The result is a Trace: every architectural event with its cycle (PSUM writes with
partition, address and bits; weight swaps; refusals; completions) plus the final state."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tensore.model import addrmap
from tensore.model import dtypes as dt
from tensore.model.array import column_chain, sig_bits_of
from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa import Descriptor, ErrorCode, Opcode, check, decode, error_code
from tensore.model.isa.check import Violation
from tensore.model.isa.enums import PeReg, PsumRound, SeedMode, TileColSize, TileRowSize
from tensore.model.isa.layouts import EVENT_NONE, LUT_ENTRIES, NUM_EVENTS
from tensore.model.isa.microop import (ARRAY_ROWS, GROUPS, KIND_OF, MAX_PACK, MX_BLOCK, MX_TILE, SEED_COLS,
                                       SEED_STATES, Kind, MicroOp, MmKind, MxOrder, Pattern, full_cols, microop,
                                       pack_of, psum_half, region_of, seed_mode, transposes)
from tensore.model.psum import Psum
from tensore.model.regs import RegisterFile
from tensore.model.sbuf import Sbuf
from tensore.model.timing import (DEFAULT_SBUF_LATENCY, FIFO_DEPTH, MAX_IN_FLIGHT, PERF_BANKS, PERF_COUNTERS,
                                  ArrayTiming, in_rhythm, load_complete, load_port_free, mm_port_free,
                                  seed_transpose_issue, sparse_end, weights_swapped)

E = ErrorCode


@dataclass
class Event:
    cycle: int
    kind: str          # issue, refuse, complete, psum_write, psum_zero, swap, state_write, reg, matmul_done
    op: int
    data: dict = field(default_factory=dict)


@dataclass
class OpRecord:
    index: int
    desc: Descriptor
    error: ErrorCode = ErrorCode.NONE
    violations: list = field(default_factory=list)
    t_push: int = 0
    t_decode: int = 0
    t_issue: int | None = None
    t_complete: int | None = None
    psum_writes: int = 0
    uop: MicroOp | None = None          # what the engine ran (None for a refused descriptor)

    @property
    def name(self) -> str:
        return self.desc.op.name.lower() if isinstance(self.desc.op, Opcode) else f"0x{self.desc.op:02x}"


@dataclass
class Trace:
    gen: Gen
    rows: int
    cols: int
    ops: list
    events: list
    stalled: str | None = None
    pe_log: list = field(default_factory=list)

    @property
    def cycles(self) -> int:
        return 1 + max((e.cycle for e in self.events), default=-1)

    def of_kind(self, kind: str) -> list:
        return [e for e in self.events if e.kind == kind]

    def pe_state(self, cycle: int) -> dict:
        """Every PE's registers during `cycle` (record_pe=True engines): the active weight (`weight`,
        code of pack slot 0, from the first cycle after its swap), the moving value register
        (`act`, the code of pack slot 0), the partial-sum register (`psum`, float32 bits) and
        their valid bits, each [rows, cols].  A PE's registers hold what it computed in the
        previous cycle window (D-15, docs/timing.md); rows below a matmul's block pass its sums on."""
        act = np.zeros((self.rows, self.cols), np.uint32)
        psum = np.zeros((self.rows, self.cols), np.uint32)
        weight = np.zeros((self.rows, self.cols), np.uint32)
        valid = np.zeros((self.rows, self.cols), bool)
        act_valid = np.zeros((self.rows, self.cols), bool)
        rgrid, cgrid = np.indices((self.rows, self.cols))
        for rec in self.pe_log:
            if rec.get("kind") == "xpose":            # (k, n) is in PE (r, n)'s sum register in cycle
                tm, bits = rec["timing"], rec["bits"]  # t_data + k + n + r + 1
                ncol, k_all = bits.shape
                kk = cycle - 1 - tm.t_data - cgrid - rgrid
                live = (cgrid < ncol) & (kk >= 0) & (kk < k_all)
                psum = np.where(live, bits[np.minimum(cgrid, ncol - 1), np.clip(kk, 0, k_all - 1)], psum)
                valid = np.where(live, True, valid)
                continue
            if rec.get("kind") != "mm":
                continue
            tm, row0, col0 = rec["timing"], rec["row0"], rec["col0"]
            swapped = rec["swapped"] & (cycle > tm.t_data + tm.passes * (rgrid + cgrid))
            weight = np.where(swapped, rec["w_code"], weight)
            steps, a = rec["steps"], rec["a"]
            k, _, n = a.shape
            m = steps[0].shape[0]
            r = np.arange(self.rows)[:, None]
            c = np.arange(self.cols)[None, :]
            # the window that ended just before `cycle`: v = (cycle - t_data) // passes - 1 - r - c
            v = (cycle - tm.t_data) // tm.passes - 1 - r - c
            in_cols = (c >= col0) & (c < col0 + m)
            live = in_cols & (v >= 0) & (v < n) & (r >= row0)
            if not live.any():
                continue
            rr = np.clip(r - row0, 0, k - 1) + np.zeros_like(c)
            cc = np.clip(c - col0, 0, m - 1) + np.zeros_like(r)
            vv = np.clip(v, 0, n - 1)
            stack = np.stack(steps)                                   # [k, m, n]
            p = stack[rr, cc, vv].view(np.uint32)
            x = rec["a_codes"][np.minimum(rr, k - 1), 0, vv]
            act = np.where(live & (r < row0 + k), x, act)
            act_valid |= live & (r < row0 + k)
            psum = np.where(live, p, psum)
            valid |= live
        return {"weight": weight, "act": act, "act_valid": act_valid, "psum": psum, "valid": valid}

    def steps(self, pe: bool = False):
        """The trace one clock at a time: (cycle, events of that cycle[, pe_state(cycle)])."""
        by_cycle: dict[int, list] = {}
        for e in self.events:
            by_cycle.setdefault(e.cycle, []).append(e)
        for cycle in range(self.cycles):
            if pe:
                yield cycle, by_cycle.get(cycle, []), self.pe_state(cycle)
            else:
                yield cycle, by_cycle.get(cycle, [])

    def replay_psum(self, psum: Psum | None = None) -> Psum:
        """Apply the trace's PSUM events (zeroing and cell writes) in order to `psum` (a fresh one
        by default): the cycle-level events alone rebuild the engine's PSUM."""
        psum = Psum() if psum is None else psum
        for e in self.events:
            d = e.data
            if e.kind == "psum_zero":
                lo, hi = d["partitions"]
                psum.zero_banks(np.arange(lo, hi + 1), d["bank"], d["banks"])
            elif e.kind == "psum_write":
                psum.cells(d["bytes"])[d["partition"], d["offset"] // d["bytes"]] = d["bits"]
        return psum

    def summary(self) -> str:
        done = [o for o in self.ops if o.error == E.NONE and o.t_complete is not None]
        refused = [o for o in self.ops if o.error != E.NONE]
        lines = [f"{self.gen.name} {self.rows}x{self.cols}: {len(self.ops)} descriptors, {len(done)} executed, "
                 f"{len(refused)} refused, {self.cycles} cycles, {len(self.of_kind('psum_write'))} PSUM writes"]
        for o in self.ops:
            if o.error != E.NONE:
                lines.append(f"  #{o.index} {o.name}: refused {o.error.name} at cycle {o.t_decode}: "
                             f"{o.violations[0] if o.violations else ''}")
            elif o.t_issue is not None:
                lines.append(f"  #{o.index} {o.name}: issue {o.t_issue}, complete {o.t_complete}, "
                             f"{o.psum_writes} PSUM writes")
        if self.stalled:
            lines.append(f"  stalled: {self.stalled}")
        return "\n".join(lines)


class Weights:
    """One plane of PE weight registers (active or shadow): values and codes per pack slot."""

    def __init__(self, rows: int, cols: int):
        self.val = np.zeros((rows, cols, MAX_PACK))
        self.code = np.zeros((rows, cols, MAX_PACK), np.uint32)
        self.dtype = np.zeros((rows, cols), np.int16)          # Dtype code of the load, 0 = never loaded
        self.pack = np.ones((rows, cols), np.int8)
        self.scale = np.zeros((rows, cols))                    # E8M0 exponent of the MX block (NaN: NaN scale)

    def copy_from(self, other: "Weights", mask: np.ndarray):
        for name in ("val", "code", "dtype", "pack", "scale"):
            getattr(self, name)[mask] = getattr(other, name)[mask]


class Engine:
    """The PE engine of one generation, with `rows` x `cols` PEs (128 x 128, MAVERICK 128 x 256)."""

    def __init__(self, gen, *, rows: int = ARRAY_ROWS, cols: int | None = None, sbuf: Sbuf | np.ndarray | None = None,
                 sbuf_latency: int = DEFAULT_SBUF_LATENCY, e4m3: str | None = None, record_pe: bool = False):
        self.gen = Gen.parse(gen)
        self.maverick = self.gen.layout == Gen.MAVERICK
        full = full_cols(self.gen)
        cols = full if cols is None else cols
        step = 2 * GROUPS if self.maverick else GROUPS     # MAVERICK: whole groups in each column half
        if not (GROUPS <= rows <= ARRAY_ROWS and rows % GROUPS == 0 and GROUPS <= cols <= full and cols % step == 0):
            raise ValueError(f"array {rows}x{cols}: rows must be a multiple of {GROUPS} up to {ARRAY_ROWS}, "
                             f"columns a multiple of {step} up to {full}")
        self.rows, self.cols = rows, cols
        self.full_cols = full
        self.sbuf = sbuf if isinstance(sbuf, Sbuf) else Sbuf(sbuf)          # None: zeros; an ndarray: its bytes
        self.sbuf_latency = sbuf_latency
        self.e4m3 = e4m3
        self.record_pe = record_pe
        self.regs = RegisterFile()
        self.psum = Psum()
        self.active, self.shadow = Weights(rows, cols), Weights(rows, cols)
        self.pending = np.zeros((rows, cols), bool)
        self.tags = np.zeros((rows, cols), np.uint8)
        self.lut = np.zeros(LUT_ENTRIES)
        self.lut_codes = np.zeros(LUT_ENTRIES, np.uint32)
        self.lut_dtype = Dtype.BFLOAT16
        self.external_events: dict[int, list] = {}
        self._last_swap = np.zeros((rows, cols), bool)

    # -- host interface -------------------------------------------------------------------------
    def write_reg(self, reg, value: int):
        """A host write of the 32-bit `value` to an arr_seq register, named ("queue_cfg") or by byte
        offset (docs/regs/arr_seq.md), as the register bus does it (D-T37): rw1c bits clear, pulse
        fields fire (perf_cntr_cfg.cntr_rst clears every perf counter)."""
        offset = reg if isinstance(reg, int) else self.regs.offset_of(reg)
        pulses = self.regs.write(offset, value)
        if pulses.get("cntr_rst"):
            for bank in PERF_BANKS:
                for i in range(PERF_COUNTERS):
                    self.regs.set(f"{bank}[{i}].instr_cnt_lsb", "value", 0)
                    self.regs.set(f"{bank}[{i}].instr_cnt_msb", "value", 0)

    def read_reg(self, reg) -> int:
        """A host read of an arr_seq register, named or by byte offset: its 32-bit value as the bus
        returns it (write-only and pulse fields read as 0)."""
        return self.regs.read(reg if isinstance(reg, int) else self.regs.offset_of(reg))

    def schedule_event(self, event: int, cycle: int):
        """An external agent sets event flag `event` at the end of `cycle`."""
        if not 0 <= event < NUM_EVENTS:
            raise ValueError(f"events are 0..{NUM_EVENTS - 1}")
        self.external_events.setdefault(event, []).append(cycle)

    # -- geometry ---------------------------------------------------------------------------------
    def region(self, d: Descriptor):
        """(row0, rows, col0, cols) of a descriptor on this array (physical PEs)."""
        return region_of(d, self.rows, self.cols)

    def microop(self, d: Descriptor) -> MicroOp:
        """The micro-op a valid descriptor runs as on this array (model.isa.microop, D-T69)."""
        return microop(d, self.rows, self.cols)

    def fits(self, d: Descriptor) -> list:
        """Array-size rule on top of model.isa.check: the active block must fit this array."""
        if KIND_OF.get(d.op) not in (Kind.LOAD, Kind.MATMUL):
            return []
        row0, rows, col0, cols = self.region(d)
        out = []
        if self.maverick:                       # tiles scale with the array
            ts = d.fields["tile_size"]
            trows = self.rows // 2 if ts["row_size_log2"] == TileRowSize.R64 else self.rows
            tcols = self.cols // 2 if ts["col_size_log2"] == TileColSize.C128 else self.cols
            if rows > trows:
                out.append(Violation(E.BAD_TILE, "num_active_rows", f"{rows} rows do not fit a "
                                     f"{trows}-row tile of this {self.rows}-row array"))
            if cols > tcols:
                out.append(Violation(E.BAD_TILE, "num_active_cols", f"{cols} columns do not fit a "
                                     f"{tcols}-column tile of this {self.cols}-column array"))
        if row0 + rows > self.rows:
            out.append(Violation(E.BAD_ACTIVE_RANGE, "num_active_rows",
                                 f"rows {row0}..{row0 + rows - 1} do not fit this {self.rows}-row array"))
        if col0 + cols > self.cols:
            out.append(Violation(E.BAD_ACTIVE_RANGE, "num_active_cols",
                                 f"columns {col0}..{col0 + cols - 1} do not fit this {self.cols}-column array"))
        return out

    def _physical_cols(self, u: MicroOp, col0, cols) -> np.ndarray:
        """Physical column of each logical stationary column m (D-14 load order)."""
        m = np.arange(cols)
        return col0 + (cols - 1 - m if u.lcf else m)

    # -- SBUF reads ---------------------------------------------------------------------------------
    def _element_order(self, u: MicroOp, vectors: int) -> np.ndarray:
        """Pattern element index of (vector v, slot j): [vectors, pack] (D-T25)."""
        v = np.arange(vectors)[:, None]
        j = np.arange(u.pack)[None, :]
        if u.mxmode == MxOrder.INTERLEAVE:
            return j * vectors + v
        if u.mxmode == MxOrder.TILED:
            t = min(MX_TILE, vectors)
            return (v // t) * t * u.pack + j * t + v % t
        return v * u.pack + j

    def _read_codes(self, pat: Pattern, partitions: int, count: int, esize_bits: int):
        """A pattern's codes: [partitions, count] (4-bit codes one per element), and its first partition."""
        offs = pat.elements()
        loc = addrmap.locate(pat.addr)
        parts = loc.partition + np.arange(partitions)
        if esize_bits == 4:
            nib = loc.offset * 2 + offs
            byte = self.sbuf.gather(parts, nib >> 1, 1)
            codes = (byte >> ((nib & 1) * 4).astype(np.uint64)) & 0xF
        else:
            codes = self.sbuf.gather(parts, loc.offset + offs * (esize_bits // 8), esize_bits // 8)
        return codes[:, :count], loc.partition

    def _read_scales(self, pat: Pattern, first_partition: int, blocks: int, pack: int, count: int) -> np.ndarray:
        """E8M0 exponents [blocks, count]: block b's scales are bytes at scale_addr in partition
        first + b * (32 / pack), one per vector or column (D-T25).  No scales: every exponent 0."""
        if pat.scale_addr is None:
            return np.zeros((blocks, count))
        loc = addrmap.locate(pat.scale_addr)
        parts = first_partition + np.arange(blocks) * (MX_BLOCK // pack)
        return dt.e8m0_exponents(self.sbuf.gather(parts, loc.offset + np.arange(count), 1))

    def _to_values(self, codes: np.ndarray, dtype, lut: bool):
        """(values, codes as stored, dtype of the values) with the LUT mode applied (D-T15)."""
        if lut:
            idx = codes.astype(np.intp)
            return self.lut[idx], self.lut_codes[idx], self.lut_dtype
        vals = dt.to_fp32(codes, dtype, self.gen, e4m3=self.e4m3).astype(np.float64)
        return vals, codes.astype(np.uint32), Dtype(dtype)

    def _width(self, dtype) -> int:
        return dt.format_of(dtype, self.gen).width

    # -- running a program ---------------------------------------------------------------------------
    def run(self, program: bytes) -> Trace:
        """Run a program (a whole number of 64-byte descriptors) from the engine's current state
        (registers, weights, PSUM, SBUF, scheduled events) and return its Trace; the state is left
        as the program leaves it.  A refused descriptor changes only the error status (SPEC D-23);
        a wait for an event nothing sets stops the run (Trace.stalled)."""
        if len(program) % 64:
            raise ValueError(f"a program is a whole number of 64-byte descriptors, got {len(program)} bytes")
        descs = [decode(program[i:i + 64], self.gen) for i in range(0, len(program), 64)]
        self._events: list[Event] = []
        self._pe_log = []
        ops = [OpRecord(i, d) for i, d in enumerate(descs)]
        depth = FIFO_DEPTH[self.regs.get("queue_cfg", "fifo_size_sel")]
        self._state = {"last_issue": -10 ** 9, "all_complete": -1, "lw_port": 0, "mm_port": 0,
                       "last_lw": -10 ** 9, "last_mm": None, "last_ldtags": -10 ** 9,
                       "last_sparse_end": -10 ** 9, "consumed": {}, "barrier_complete": -1,
                       "completions": []}
        stalled = None
        for i, op in enumerate(ops):
            pop_prev = ops[i - 1].t_issue if i and ops[i - 1].t_issue is not None else \
                (ops[i - 1].t_decode if i else -1)
            op.t_push = i if i < depth else max(i, (ops[i - depth].t_issue if ops[i - depth].t_issue is not None
                                                       else ops[i - depth].t_decode) + 1)
            op.t_decode = max(op.t_push + 1, pop_prev + 1)
            stationary = self._stationary_dtype(op.desc)
            v = check(op.desc, stationary_dtype=stationary, array_cols=self.cols)
            if not v:
                v = self.fits(op.desc) + self._runtime_rules(op.desc)
            op.violations, op.error = sorted(v, key=lambda x: x.code), error_code(v)   # [0]: the code's reason
            if op.error != E.NONE:
                self._refuse(op)
                continue
            op.uop = self.microop(op.desc)
            t = self._earliest_issue(op)
            if t is None:
                stalled = f"descriptor {i} ({op.name}) waits for event {op.desc.events.wait_event}, which is never set"
                op.t_issue = None
                ops = ops[:i + 1]
                break
            op.t_issue = t
            self._execute(op)
            self._state["last_issue"] = t
            self._state["all_complete"] = max(self._state["all_complete"], op.t_complete)
            self._state["completions"].append(op.t_complete)
            if op.uop.barrier:
                self._state["barrier_complete"] = op.t_complete
            self._complete(op)
        events = sorted(self._events, key=lambda e: e.cycle)
        return Trace(self.gen, self.rows, self.cols, ops, events, stalled, self._pe_log)

    def _emit(self, cycle, kind, op, **data):
        self._events.append(Event(int(cycle), kind, op, data))

    def _refuse(self, op: OpRecord):
        opcode = int(op.desc.raw[0])
        if not self.regs.get("err_status", "err"):
            self.regs.set("err_status", "err_code", int(op.error))
            self.regs.set("err_status", "err_opcode", opcode)
        self.regs.set("err_status", "err", 1)
        self.regs.add("err_count", "count")
        self._emit(op.t_decode, "refuse", op.index, code=op.error, opcode=opcode,
                   field=op.violations[0].field if op.violations else "")

    def _complete(self, op: OpRecord):
        self.regs.add("done_count", "count")
        self._emit(op.t_issue, "issue", op.index, opcode=int(op.desc.op))
        self._emit(op.t_complete, "complete", op.index, opcode=int(op.desc.op))
        se = op.desc.events.set_event
        if se != EVENT_NONE:
            self.external_events.setdefault(se, []).append(op.t_complete)
        if self.regs.get("perf_cntr_cfg", "cntr_en"):
            for bank in op.uop.banks:
                self.regs.count64(bank, op.uop.counter)

    def _stationary_dtype(self, d):
        """The dtype the loaded weights of a matmul's region hold (for the fp32 no-mix rule)."""
        if d.op not in (Opcode.MATMUL, Opcode.MATMUL_SPARSE) or d.layout is None:
            return None
        if transposes(d) or seed_mode(d):
            return None
        row0, rows, col0, cols = self.region(d)
        if row0 + rows > self.rows or col0 + cols > self.cols:
            return None
        reg = self._current_weights()
        codes = np.unique(reg.dtype[row0:row0 + rows, col0:col0 + cols])
        codes = [c for c in codes.tolist() if c]
        if any(c == Dtype.FP32 for c in codes):
            return Dtype.FP32 if all(c == Dtype.FP32 for c in codes) else Dtype.BFLOAT16 \
                if d.fields["in_dtype"] == Dtype.FP32 else Dtype.FP32
        return Dtype(codes[0]) if codes else None

    def _current_weights(self) -> Weights:
        """The weights a matmul issued now would use: shadow where a load is pending."""
        w = Weights(self.rows, self.cols)
        w.copy_from(self.active, np.ones((self.rows, self.cols), bool))
        w.copy_from(self.shadow, self.pending)
        return w

    def _runtime_rules(self, d) -> list:
        """Rules that need engine state (D-T31): weights loaded in the matmul's pump mode (BAD_MX),
        the PeRegWrite value fetched from SBUF (BAD_REGISTER)."""
        out = []
        if d.op in (Opcode.MATMUL, Opcode.MATMUL_MX) and not transposes(d) and not seed_mode(d):
            row0, rows, col0, cols = self.region(d)
            w = self._current_weights()
            packs = np.unique(w.pack[row0:row0 + rows, col0:col0 + cols][w.dtype[row0:row0 + rows, col0:col0 + cols] != 0])
            if packs.size and (packs.size > 1 or int(packs[0]) != pack_of(d)):
                out.append(Violation(E.BAD_MX, "perf_mode", f"weights were loaded {int(packs[0])} per PE, "
                                     f"the matmul streams {pack_of(d)}"))
        if d.op == Opcode.PE_REG_WRITE and not self.regs.get("queue_cfg", "bypass_peregwrite_instr"):
            value = self._reg_value(d)
            if d.fields["reg"] == PeReg.PSUM_ROUND and value not in (0, 1):
                out.append(Violation(E.BAD_REGISTER, "src_mem_pattern", f"PSUM_ROUND value {value:#x} from SBUF"))
        return out

    def _reg_value(self, d) -> int:
        if self.regs.get("queue_cfg", "bypass_peregwrite_instr"):
            return d.fields["value"]
        src = d.fields["src_mem_pattern"]
        loc = addrmap.locate(src["start_addr"])
        return int(self.sbuf.gather([loc.partition], [loc.offset], 4)[0, 0])

    # -- scheduling (docs/timing.md) --------------------------------------------------------------
    def _earliest_issue(self, op: OpRecord):
        st, d, u = self._state, op.desc, op.uop
        t = op.t_decode + 1
        if self.regs.get("arr_cluster_cfg", "en_inter_instr_dly"):
            t = max(t, st["last_issue"] + 1 + self.regs.get("arr_cluster_cfg", "inter_instr_dly_cnt"))
        t = max(t, st["barrier_complete"] + 1)      # nothing overtakes a barrier
        serial = self.regs.get("queue_cfg", "disable_dependency_check") or u.barrier
        mm = st["last_mm"]
        if serial:
            t = max(t, st["all_complete"] + 1)
        elif u.kind == Kind.LOAD:
            t = max(t, st["lw_port"])
            if mm is not None:           # every PE of the last matmul has swapped before a shadow write
                t = max(t, weights_swapped(mm["t_data"], mm["passes"], self.rows, self.cols) - self.sbuf_latency)
            if d.op == Opcode.LDTAGS:
                t = max(t, st["last_sparse_end"])
        else:                            # matmuls
            t = max(t, st["mm_port"], st["last_lw"] + 1, st["last_ldtags"] + 1)
            if mm is not None and (mm["passes"] != u.passes or mm["kind"] != u.mmkind):
                t = max(t, mm["t_complete"] + 1)
        done = sorted(st["completions"])
        if len(done) >= MAX_IN_FLIGHT:          # at most 16 micro-ops in flight (D-T38)
            t = max(t, done[-MAX_IN_FLIGHT] + 1)
        we = d.events.wait_event
        if we != EVENT_NONE:
            last = st["consumed"].get(we, -1)
            sets = [s for s in self.external_events.get(we, []) if s >= last]
            if not sets:
                return None
            t = max(t, min(sets) + 1)
        if u.passes > 1 and mm is not None:     # one advance rhythm in the array (D-T38)
            while t <= mm["t_complete"] and not in_rhythm(t, mm["t_issue"], u.passes):
                t += 1
        if we != EVENT_NONE:
            st["consumed"][we] = t
        return t

    # -- execution ---------------------------------------------------------------------------------
    def _execute(self, op: OpRecord):
        handler = {Kind.LOAD: self._ldtags if op.desc.op == Opcode.LDTAGS else self._ldweights,
                   Kind.MATMUL: self._matmul, Kind.REGWRITE: self._pe_reg_write, Kind.LUT: self._conv_lut_load,
                   Kind.SEED: self._pe_manage_seed}[op.uop.kind]
        handler(op)

    def _ldweights(self, op: OpRecord, identity=None):
        t, u = op.t_issue, op.uop
        L = self.sbuf_latency
        row0, rows, col0, cols = u.block
        pack = u.pack
        phys = self._physical_cols(u, col0, cols) if identity is None else np.arange(cols)
        sl = slice(row0, row0 + rows)
        if identity is not None:
            codes, dtype = identity
            grid = np.zeros((rows, cols, 1), np.uint64)
            diag = np.arange(cols) % SEED_STATES
            for k in range(rows):
                grid[k, diag == k, 0] = codes[k]
            vals, stored, vdtype = self._to_values(grid, dtype, False)
            scales = np.zeros((rows, cols))
        else:
            dtype = u.dtype
            bits = 32 if u.tagw else self._width(dtype)
            if u.xpose:
                codes, first = self._read_codes(u.src, cols, rows * pack, bits)      # [cols, rows]
                grid = codes.T.reshape(rows, pack, cols).transpose(0, 2, 1)
            else:
                codes, first = self._read_codes(u.src, rows, cols * pack, bits)
                grid = codes[:, self._element_order(u, cols)]                         # [rows, cols, pack]
            if u.tagw:
                self.tags[row0:row0 + rows, phys] = (grid[:, :, 0] >> 16).astype(np.uint8) & 0xF
                if self.record_pe:
                    self._pe_log.append({"kind": "tags", "op": op.index, "t": t, "latency": L, "row0": row0,
                                         "rows": rows, "phys": phys, "tags": self.tags[sl, phys].copy()})
                grid = grid & 0xFFFF
            vals, stored, vdtype = self._to_values(grid, dtype, u.lut)
            scales = np.zeros((rows, cols))
            if u.mx:
                blocks = rows * pack // MX_BLOCK
                s = self._read_scales(u.src, first, blocks, pack, cols)                 # [blocks, cols]
                scales = s[(np.arange(rows) * pack) // MX_BLOCK]
        sh = self.shadow
        sh.val[sl, phys, :pack] = vals
        sh.val[sl, phys, pack:] = 0
        sh.code[sl, phys, :pack] = stored
        sh.code[sl, phys, pack:] = 0
        sh.dtype[sl, phys] = int(vdtype)
        sh.pack[sl, phys] = pack
        sh.scale[sl, phys] = scales
        self.pending[sl, phys] = True
        if self.record_pe:
            self._pe_log.append({"kind": "lw", "op": op.index, "t": t, "latency": L, "row0": row0, "rows": rows,
                                 "phys": np.asarray(phys), "codes": stored.astype(np.uint32), "dtype": int(vdtype),
                                 "pack": pack, "scales": scales})
        for k in range(rows):
            self._emit(t + k + L, "shadow_write", op.index, row=row0 + k)
        op.t_complete = load_complete(t, rows, L)
        st = self._state
        st["lw_port"] = load_port_free(t, rows)
        st["last_lw"] = t

    def _ldtags(self, op: OpRecord):
        d, t, u = op.desc, op.t_issue, op.uop
        row0, rows, col0, cols = u.block
        words, _ = self._read_codes(u.src, rows, (cols + 3) // 4, 16)
        m = np.arange(cols)
        nib = (words[:, m // 4] >> ((3 - m % 4) * 4).astype(np.uint64)) & 0xF        # LSB = larger column
        phys = self._physical_cols(u, col0, cols)                                   # LAST_COL_FIRST
        self.tags[row0:row0 + rows, phys] = (nib | d.fields["force_tag_bits"]).astype(np.uint8) & 0xF
        if self.record_pe:
            self._pe_log.append({"kind": "tags", "op": op.index, "t": t, "latency": self.sbuf_latency,
                                 "row0": row0, "rows": rows, "phys": phys,
                                 "tags": self.tags[row0:row0 + rows, phys].copy()})
        op.t_complete = load_complete(t, rows, self.sbuf_latency)
        self._state["lw_port"] = load_port_free(t, rows)
        self._state["last_ldtags"] = t

    def _pe_reg_write(self, op: OpRecord):
        d = op.desc
        value = self._reg_value(d)
        when = op.t_issue + (0 if self.regs.get("queue_cfg", "bypass_peregwrite_instr") else self.sbuf_latency)
        if d.fields["reg"] == PeReg.PSUM_ROUND:
            self.psum.round_mode = PsumRound(value)
        self._emit(when, "reg", op.index, reg=int(d.fields["reg"]), value=value)
        op.t_complete = when

    def _conv_lut_load(self, op: OpRecord):
        u = op.uop
        n = op.desc.fields["num_entries"]
        codes, _ = self._read_codes(u.src, 1, n, self._width(u.dtype))
        self.lut_codes[:n] = codes[0]
        self.lut[:n] = dt.to_fp32(codes[0], u.dtype, self.gen).astype(np.float64)
        self.lut_dtype = u.dtype
        op.t_complete = op.t_issue + self.sbuf_latency
        self._emit(op.t_complete, "lut", op.index, entries=n)

    def _matmul(self, op: OpRecord):
        d, f, t, u = op.desc, op.desc.fields, op.t_issue, op.uop
        row0, rows, col0, cols = u.block
        if u.seed:
            return self._seed_matmul(op, u.seed)
        timing = ArrayTiming(t + self.sbuf_latency, self.rows, u.passes)
        self._swap(op, row0, rows, col0, cols, timing)
        dtype = u.dtype
        if u.xpose:
            codes, _ = self._read_codes(u.src, rows, u.src.count, self._width(dtype))
            bits = codes.astype(np.uint32).T                                    # [N, K]: partition n, element k
            if self.record_pe:
                self._pe_log.append({"kind": "xpose", "op": op.index, "timing": timing, "bits": bits})
            self._write_results(op, timing, raw=bits, vectors=bits.shape[1], ncols=bits.shape[0], col0=0)
            return
        pack = u.pack
        n_vec = u.src.count // pack
        w = self.active
        wsl = (slice(row0, row0 + rows), slice(col0, col0 + cols))
        w_vals = w.val[wsl[0], wsl[1], :pack].transpose(0, 2, 1)                # [rows, pack, cols]
        st_dtypes = [Dtype(c) for c in np.unique(w.dtype[wsl]).tolist() if c]
        if d.op == Opcode.MATMUL_SPARSE:
            fm = u.src.nums[3]
            codes, _ = self._read_codes(u.src, rows, n_vec, self._width(dtype))
            a_vals, a_codes, a_dtype = self._to_values(codes.reshape(rows, fm, n_vec // fm), dtype, u.lut)
            result = self._sparse_chain(w_vals[:, 0], a_vals, self.tags[wsl] & 3, partials=self.record_pe)
            n_vec //= fm
            if self.record_pe:
                result, steps = result
                self._pe_log.append({"kind": "mm", "op": op.index, "timing": timing, "row0": row0, "col0": col0,
                                     "rows": rows, "cols": cols, "pack": fm, "steps": steps, "a": a_vals,
                                     "a_codes": np.asarray(a_codes, np.uint32), "a_dtype": int(a_dtype),
                                     "fp32_mode": 0, "mx": False, "sa": np.zeros((rows, n_vec)), "fmaps": fm,
                                     "w_code": self.active.code[:, :, 0].copy(), "swapped": self._last_swap})
        else:
            bits = 4 if u.mx and dtype in (Dtype.FP4_EXP2, Dtype.INT4) else self._width(dtype)
            codes, first = self._read_codes(u.src, rows, n_vec * pack, bits)
            order = self._element_order(u, n_vec)
            a_vals, a_codes, a_dtype = self._to_values(codes[:, order].transpose(0, 2, 1), dtype, u.lut)  # [rows, pack, N]
            scales = None
            sa_rows = np.zeros((rows, n_vec))
            if u.mx:
                blocks = rows * pack // MX_BLOCK
                sa = self._read_scales(u.src, first, blocks, pack, n_vec)
                blk = (np.arange(rows) * pack) // MX_BLOCK
                scales = (w.scale[wsl], sa[blk])
                sa_rows = sa[blk]
            sig = sig_bits_of(a_dtype) + max((sig_bits_of(s) for s in st_dtypes), default=0)
            result = column_chain(w_vals, a_vals, sig_bits=sig, fp32_mode=f.get("fp32_mode"), scales=scales,
                                  partials=self.record_pe)
            if self.record_pe:
                result, steps = result
                self._pe_log.append({"kind": "mm", "op": op.index, "timing": timing, "row0": row0, "col0": col0,
                                     "rows": rows, "cols": cols, "pack": pack, "steps": steps, "a": a_vals,
                                     "a_codes": np.asarray(a_codes, np.uint32), "a_dtype": int(a_dtype),
                                     "fp32_mode": int(f.get("fp32_mode", 0)), "mx": u.mx, "sa": sa_rows,
                                     "w_code": self.active.code[:, :, 0].copy(), "swapped": self._last_swap})
        self._write_results(op, timing, values=result, vectors=n_vec, ncols=cols, col0=col0)

    def _sparse_chain(self, w, a, fmap, partials=False):
        """MatmulSparse chain: PE (r, c) multiplies by moving[r, fmap[r, c], n]; a fmap beyond the
        F sent contributes nothing (D-T26).  Products are <= 22 bits: the float64 add is exact."""
        from tensore.model.mac import canonical_nan
        rows, fm, n = a.shape
        psum = np.zeros((w.shape[1], n), np.float32)
        steps = []
        for r in range(rows):
            sel = np.minimum(fmap[r], fm - 1)
            g = a[r, sel, :]                                              # [cols, N]
            with np.errstate(invalid="ignore", over="ignore"):
                new = (psum + w[r][:, None] * g).astype(np.float32)
            psum = np.where((fmap[r] < fm)[:, None], new, psum)
            if partials:
                steps.append(canonical_nan(psum))
        return (canonical_nan(psum), steps) if partials else canonical_nan(psum)

    def _swap(self, op, row0, rows, col0, cols, timing):
        region = np.zeros((self.rows, self.cols), bool)
        region[row0:row0 + rows, col0:col0 + cols] = True
        swap = region & self.pending
        self._last_swap = swap.copy()
        if swap.any():
            self.active.copy_from(self.shadow, swap)
            self.pending &= ~swap
            self._emit(timing.pe_cycle(row0, col0, 0), "swap", op.index, rows=(row0, row0 + rows),
                       cols=(col0, col0 + cols))

    def _dst_offsets(self, u: MicroOp, count: int) -> tuple[int, np.ndarray, int]:
        """(first partition, byte offsets of the dst elements, cell bytes)."""
        esize = 2 if u.out_bf16 else 4
        loc = addrmap.locate(u.dst.addr)
        offs = loc.offset + u.dst.elements() * esize
        return loc.partition, offs[:count], esize

    def _write_results(self, op, timing, *, values=None, raw=None, vectors, ncols, col0):
        """Apply the PSUM writes of one matmul in cycle order and emit them."""
        d, u = op.desc, op.uop
        half = self._half()
        p0, offs, esize = self._dst_offsets(u, vectors * (2 if ncols > half and self.maverick else 1))
        out_dtype = Dtype.BFLOAT16 if u.out_bf16 else Dtype.FP32
        accumulate = u.accumulate and raw is None
        c = np.arange(ncols)
        slot = c // half if self.maverick else np.zeros(ncols, int)
        part = p0 + (c % half if self.maverick else c)
        first_write = timing.write_cycle(col0, 0)
        if u.zero_banks:
            bank = (offs[0] // addrmap.PSUM_BANK_BYTES) if offs.size else 0
            self.psum.zero_banks(np.unique(part), bank, u.zero_banks)
            self._emit(first_write, "psum_zero", op.index, partitions=(int(part.min()), int(part.max())),
                       bank=int(offs[0] // addrmap.PSUM_BANK_BYTES), banks=u.zero_banks)
        last = first_write
        # cycle of (column c, vector v): t_data + passes*(v + R + col0 + c) + 1; walk the diagonals in order
        for step in range(vectors + ncols - 1):
            for s in (0, 1) if self.maverick else (0,):
                cc = c[(slot == s) & (c <= step) & (step - c < vectors)]
                if not cc.size:
                    continue
                vv = step - cc
                cycle = timing.write_cycle(col0 + int(cc[0]), int(vv[0]))
                o = offs[vv + s * vectors]
                if raw is not None:
                    bits = raw[cc, vv]
                    if esize == 2:
                        self.psum.cells(2)[part[cc], o // 2] = bits.astype(np.uint16)
                    else:
                        self.psum.write_raw32(part[cc], o, bits)
                else:
                    bits = self.psum.write(part[cc], o, values[cc, vv], out_dtype=out_dtype, accumulate=accumulate)
                for pi, oi, bi in zip(part[cc].tolist(), o.tolist(), bits.tolist()):
                    self._emit(cycle, "psum_write", op.index, partition=pi, offset=oi, bits=int(bi), bytes=esize)
                op.psum_writes += cc.size
                last = max(last, cycle)
        done_at = last if self.regs.get("arr_cluster_cfg", "matmul_done_last") else first_write
        self._emit(done_at, "matmul_done", op.index)
        self.regs.add("matmul_done_count", "count")
        op.t_complete = last
        self._state["mm_port"] = mm_port_free(op.t_issue, vectors, timing.passes)
        self._state["last_mm"] = {"t_data": timing.t_data, "passes": timing.passes, "t_complete": last,
                                  "kind": u.mmkind, "t_issue": op.t_issue}
        if d.op == Opcode.MATMUL_SPARSE:
            self._state["last_sparse_end"] = sparse_end(op.t_issue, vectors, self.cols)

    def _half(self) -> int:
        return psum_half(self.gen, self.cols)

    # -- seeds (seed 000 section 5) -----------------------------------------------------------------
    def _pe_manage_seed(self, op: OpRecord):
        """MARIANA: a Ldweights of the identity (rows 0-15) then a transposing seed Matmul."""
        f, u, L = op.desc.fields, op.uop, self.sbuf_latency
        ident = f["identity_mem_pattern"]
        idt = Dtype(f["identity_dtype"])
        loc = addrmap.locate(ident["start_addr"])
        esize = max(1, self._width(idt) // 8)
        offs = loc.offset + np.arange(SEED_STATES) * ident["step_elem"][0] * esize
        codes = self.sbuf.gather([loc.partition], offs, esize)[0]
        self._ldweights(op, identity=(codes, idt))
        t_mm = seed_transpose_issue(op.t_issue, u.rows, L)
        timing = ArrayTiming(t_mm + L, self.rows, 1)
        self._swap(op, *u.block, timing)
        parts = u.cols
        if f["mode"] == SeedMode.LOAD_SEED:
            src = f["src_seed_mem_pattern"]
            sl = addrmap.locate(src["start_addr"])
            offs = sl.offset + self.sbuf.offsets(src["step_elem"], src["num_elem"], 4)
            seeds = self.sbuf.gather(np.arange(SEED_STATES) + sl.partition, offs[:SEED_COLS], 4).astype(np.uint32)
            last = t_mm
            for s in range(SEED_STATES):
                for p in range(parts):
                    cyc = timing.write_cycle(p, s)
                    self.psum.sr_state[p, s // addrmap.PSUM_SR_SLOTS, s % addrmap.PSUM_SR_SLOTS] = seeds[s, p]
                    self._emit(cyc, "state_write", op.index, partition=p, state=s, value=int(seeds[s, p]))
                    last = max(last, cyc)
            op.t_complete = last
        else:
            rows = self.psum.seeds_as_rows()                                     # [128, 16]
            dst = f["dst_seed_mem_pattern"]
            dl = addrmap.locate(dst["start_addr"])
            offs = dl.offset + self.sbuf.offsets(dst["step_elem"], dst["num_elem"], 4)
            raw = rows[:parts].astype(np.uint32)                                   # [partition, state]
            self._write_seed_cells(op, timing, raw, offs, parts)
        self._state["last_mm"] = {"t_data": timing.t_data, "passes": 1, "t_complete": op.t_complete,
                                  "kind": MmKind.XPOSE, "t_issue": t_mm}
        self._state["mm_port"] = mm_port_free(t_mm, SEED_STATES, 1)

    def _write_seed_cells(self, op, timing, raw, offs, parts):
        last = 0
        for s in range(raw.shape[1]):
            for p in range(parts):
                cyc = timing.write_cycle(p, s)
                self.psum.write_raw32([p], offs[s:s + 1], raw[p:p + 1, s])
                self._emit(cyc, "psum_write", op.index, partition=p, offset=int(offs[s]), bits=int(raw[p, s]), bytes=4)
                op.psum_writes += 1
                last = max(last, cyc)
        op.t_complete = last

    def _seed_matmul(self, op: OpRecord, mode: SeedMode):
        """MAVERICK seed micro-op (seed 000 section 5.1 contract): bank = dst bank, slot j = column half,
        partition = column mod half.  LOAD takes 2 x half INT32 from SBUF; SAVE writes the 1x1x2 dst."""
        u = op.uop
        timing = ArrayTiming(op.t_issue + self.sbuf_latency, self.rows, 1)
        half = self._half()
        dl = addrmap.locate(u.dst.addr)
        bank = dl.offset // addrmap.PSUM_BANK_BYTES
        last = timing.write_cycle(0, 0)
        if mode == SeedMode.LOAD_SEED:
            codes, _ = self._read_codes(u.src, 1, 2 * half, 32)
            for c in range(2 * half):
                p, j = c % half, c // half
                cyc = timing.write_cycle(c, 0)
                self.psum.sr_state[dl.partition + p, bank, j] = np.uint32(codes[0, c])
                self._emit(cyc, "state_write", op.index, partition=dl.partition + p, state=2 * bank + j,
                           value=int(codes[0, c]))
                last = max(last, cyc)
        else:
            offs = dl.offset + u.dst.elements() * 4
            for c in range(2 * half):
                p, j = c % half, c // half
                cyc = timing.write_cycle(c, 0)
                value = self.psum.sr_state[dl.partition + p, bank, j]
                self.psum.write_raw32([dl.partition + p], offs[j:j + 1], np.array([value], np.uint32))
                self._emit(cyc, "psum_write", op.index, partition=dl.partition + p, offset=int(offs[j]),
                           bits=int(value), bytes=4)
                op.psum_writes += 1
                last = max(last, cyc)
        op.t_complete = last
        self._state["last_mm"] = {"t_data": timing.t_data, "passes": 1, "t_complete": last, "kind": MmKind.XPOSE,
                                  "t_issue": op.t_issue}
        self._state["mm_port"] = mm_port_free(op.t_issue, 1, 1)
