"""The golden Engine: one generation's PE engine composed of its parts (model/engine/__init__.py),
with the host interface (registers, events), the array's geometry, decode and run()."""
from __future__ import annotations

import numpy as np

from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa import Descriptor, ErrorCode, Opcode, check, decode, error_code
from tensore.model.isa.check import Violation
from tensore.model.isa.rules import Ints, array_fits
from tensore.model.isa.layouts import EVENT_NONE, LUT_ENTRIES, NUM_EVENTS
from tensore.model.isa.microop import (ARRAY_ROWS, GROUPS, MicroOp, full_cols, microop, pack_of,
                                       region_of, row_tile, seed_mode, transposes)
from tensore.model.psum import Psum
from tensore.model.regs import RegisterFile
from tensore.model.sbuf import Sbuf
from tensore.model.timing import (DEFAULT_PROFILE, DEFAULT_SBUF_LATENCY, FIFO_DEPTH, PERF_BANKS, PERF_COUNTERS,
                                  write_cycle)
from tensore.model.timing import profile as timing_profile
from tensore.model.trace import Event, Trace

from tensore.model.engine.execute import Execution
from tensore.model.engine.issue import IssueRules
from tensore.model.engine.operands import Operands
from tensore.model.engine.psum_order import PsumOrder, _Writes
from tensore.model.engine.records import OpRecord, Weights, _distinct
from tensore.model.engine.seeds import Seeds

E = ErrorCode
TRACE_MODES = ("detailed", "aggregate")


def check_array(gen, rows: int, cols: int) -> None:
    """The one size rule of an engine (the golden model's and every command's): rows a multiple of
    GROUPS up to ARRAY_ROWS, columns a multiple of GROUPS (MAVERICK: whole groups in each column half)
    up to the generation's full width; else a ValueError."""
    full = full_cols(gen)
    step = 2 * GROUPS if Gen.parse(gen).layout == Gen.MAVERICK else GROUPS
    if not (GROUPS <= rows <= ARRAY_ROWS and rows % GROUPS == 0 and GROUPS <= cols <= full and cols % step == 0):
        raise ValueError(f"array {rows}x{cols}: rows must be a multiple of {GROUPS} up to {ARRAY_ROWS}, "
                         f"columns a multiple of {step} up to {full}")


class Engine(IssueRules, Execution, Seeds, Operands, PsumOrder):
    """The PE engine of one generation, with `rows` x `cols` PEs (128 x 128, MAVERICK 128 x 256).
    trace: "detailed" (an Event per PSUM write) or "aggregate" (a WriteBlock per matmul); timing: the
    profile of issue rules (model/timing.py PROFILES, D-T98)."""

    def __init__(self, gen, *, rows: int = ARRAY_ROWS, cols: int | None = None, sbuf: Sbuf | np.ndarray | None = None,
                 sbuf_latency: int = DEFAULT_SBUF_LATENCY, e4m3: str | None = None, record_pe: bool = False,
                 trace: str = "detailed", timing: str = DEFAULT_PROFILE):
        if trace not in TRACE_MODES:
            raise ValueError(f"trace {trace!r}: one of {', '.join(TRACE_MODES)}")
        self.aggregate = trace == "aggregate"
        self.gen = Gen.parse(gen)
        self.maverick = self.gen.layout == Gen.MAVERICK
        full = full_cols(self.gen)
        cols = full if cols is None else cols
        check_array(self.gen, rows, cols)
        self.rows, self.cols = rows, cols
        self.full_cols = full
        self.sbuf = sbuf if isinstance(sbuf, Sbuf) else Sbuf(sbuf)          # None: zeros; an ndarray: its bytes
        self.sbuf_latency = sbuf_latency
        self.timing = timing_profile(timing)                              # the issue rules (D-T98)
        # row tiles with a moving port each (row_tiles, D-T100); one tile of every row without
        self.tile = row_tile(self.gen, rows) if self.timing.row_tiles else rows
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
        self._current_of: dict = {}
        self._touch = None                  # _first_by_halves' map of PSUM half-words

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
        """An external agent sets event flag `event` at the end of `cycle`; a cycle before the run
        (below -1) sets it before cycle 0, as -1 does (the flag stays set until a wait consumes it)."""
        if not 0 <= event < NUM_EVENTS:
            raise ValueError(f"events are 0..{NUM_EVENTS - 1}")
        self.external_events.setdefault(event, []).append(max(cycle, -1))

    # -- geometry ---------------------------------------------------------------------------------
    def region(self, d: Descriptor):
        """(row0, rows, col0, cols) of a descriptor on this array (physical PEs)."""
        return region_of(d, self.rows, self.cols)

    def microop(self, d: Descriptor) -> MicroOp:
        """The micro-op a valid descriptor runs as on this array (model.isa.microop, D-T69)."""
        return microop(d, self.rows, self.cols)

    def fits(self, d: Descriptor) -> list:
        """Array-size rules on top of model.isa.check (rules.array_fits): the active block fits this array."""
        v = Ints(d, self.cols)
        return [Violation(r.code, r.field, r.message(v)) for r in array_fits(v, self.rows, self.cols)]

    # -- running a program ---------------------------------------------------------------------------
    def run(self, program: bytes) -> Trace:
        """Run a program (a whole number of 64-byte descriptors) from the engine's current state
        (registers, weights, PSUM, SBUF, scheduled events) and return its Trace; the state is left
        as the program leaves it.  A refused descriptor changes only the error status (SPEC D-23);
        a wait for an event nothing sets stops the run (Trace.stalled)."""
        if len(program) % 64:
            raise ValueError(f"a program is a whole number of 64-byte descriptors, got {len(program)} bytes")
        descs = [decode(program[i:i + 64], self.gen) for i in range(0, len(program), 64)]
        self._log: list = []
        self._pe_log = []
        self._current_of = {}                           # the host may have changed the weights
        ops = [OpRecord(i, d) for i, d in enumerate(descs)]
        depth = FIFO_DEPTH[self.regs.get("queue_cfg", "fifo_size_sel")]
        self._state = self._scoreboard()
        stalled = None
        self._pending: list[_Writes] = []
        self._errors: list = []                         # (cycle, after issue, code, opcode), applied in cycle order
        for i, op in enumerate(ops):
            self._enqueue(ops, i, depth)
            if not self._decode(op):
                continue
            t = self._earliest_issue(op)
            if t is None:
                stalled = f"descriptor {i} ({op.name}) waits for event {op.desc.events.wait_event}, which is never set"
                op.t_issue = None
                ops = ops[:i + 1]
                break
            op.t_issue = t
            self._flush(write_cycle(t + self.sbuf_latency, self.tile, 1, 0, 0))     # the earliest write from t on
            self._execute(op)
            self._issued(op)
            self._complete(op)
        self._flush(float("inf"))
        self._error_status()
        return Trace(self.gen, self.rows, self.cols, ops, self._log, stalled, self._pe_log, len(descs))

    def _decode(self, op: OpRecord) -> bool:
        """Decode and check a descriptor (SPEC D-23): its micro-op (True), or refused (False)."""
        stationary = self._stationary_dtype(op.desc)
        v = check(op.desc, stationary_dtype=stationary, array_cols=self.cols)
        if not v:
            v = self.fits(op.desc) + self._runtime_rules(op.desc)
        op.violations, op.error = sorted(v, key=lambda x: x.code), error_code(v)   # [0]: the code's reason
        if op.error != E.NONE:
            self._refuse(op)
            return False
        op.uop = self.microop(op.desc)
        return True

    def _emit(self, cycle, kind, op, **data):
        self._log.append(Event(int(cycle), kind, op, data))

    def _refuse(self, op: OpRecord):
        opcode = int(op.desc.raw[0])
        self._errors.append((op.t_decode, 0, op.error, opcode))
        self._emit(op.t_decode, "refuse", op.index, code=op.error, opcode=opcode,
                   field=op.violations[0].field if op.violations else "")

    def _fault(self, op: OpRecord, cycle: int, code: ErrorCode, reason: str):
        """An error an issued micro-op reports in `cycle` (D-T38 (6)): in the error status, as a refusal is."""
        op.fault = code
        opcode = int(op.desc.raw[0])
        self._errors.append((cycle, 1, code, opcode))
        self._emit(cycle, "error", op.index, code=code, opcode=opcode, reason=reason)

    def _error_status(self):
        """err_status / err_count (SPEC section 9) from the run's errors in cycle order: the first
        since err was cleared is captured (a refusal before an error reported in the same cycle)."""
        for _, _, code, opcode in sorted(self._errors, key=lambda e: e[:2]):
            if not self.regs.get("err_status", "err"):
                self.regs.set("err_status", "err_code", int(code))
                self.regs.set("err_status", "err_opcode", opcode)
            self.regs.set("err_status", "err", 1)
            self.regs.add("err_count", "count")

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
        codes = _distinct(self._current("dtype")[row0:row0 + rows, col0:col0 + cols])
        codes = [c for c in codes.tolist() if c]
        if any(c == Dtype.FP32 for c in codes):
            return Dtype.FP32 if all(c == Dtype.FP32 for c in codes) else Dtype.BFLOAT16 \
                if d.fields["in_dtype"] == Dtype.FP32 else Dtype.FP32
        return Dtype(codes[0]) if codes else None

    def _current(self, name: str) -> np.ndarray:
        """A [rows, cols] field (dtype, pack) of the weights a matmul issued now would use: the
        shadow's where a load is pending (kept until a load or a swap changes them; read only)."""
        if name not in self._current_of:
            self._current_of[name] = np.where(self.pending, getattr(self.shadow, name), getattr(self.active, name))
        return self._current_of[name]

    def _runtime_rules(self, d) -> list:
        """Rules that need engine state (D-T31): weights loaded in the matmul's pump mode (BAD_MX).
        A PeRegWrite's SBUF value is known only after its fetch (_pe_reg_write)."""
        out = []
        if d.op in (Opcode.MATMUL, Opcode.MATMUL_MX) and not transposes(d) and not seed_mode(d):
            row0, rows, col0, cols = self.region(d)
            blk = (slice(row0, row0 + rows), slice(col0, col0 + cols))
            packs = _distinct(self._current("pack")[blk][self._current("dtype")[blk] != 0])
            if packs.size and (packs.size > 1 or int(packs[0]) != pack_of(d)):
                loaded = " and ".join(str(int(p)) for p in packs)         # a block of mixed loads names each
                out.append(Violation(E.BAD_MX, "perf_mode", f"weights were loaded {loaded} per PE, "
                                     f"the matmul streams {pack_of(d)}"))
        return out
