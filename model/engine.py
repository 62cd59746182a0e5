"""The golden engine: runs a descriptor program against SBUF and PSUM, cycle-accurately.

The sequencer (seed 000 section 10, SPEC section 8) takes descriptors in order through the
instruction FIFO, decodes and checks each one (SPEC D-23), issues it when its dependencies allow
(docs/timing.md), and executes it: the values come from model.array / model.psum, the cycles from
model.timing; PSUM writes are made in cycle order across micro-ops, as hardware makes them
(Engine._flush).  The result is a Trace (model/trace.py): every architectural event with its cycle
(PSUM writes with partition, address and bits; weight swaps; refusals; completions) plus the final
state.  trace="aggregate" records each matmul's PSUM writes as one WriteBlock of arrays instead of
an Event per write (same values, cycles and order; what a large kernel needs, D-T77)."""
from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field

import numpy as np

from tensore.model import addrmap
from tensore.model import dtypes as dt
from tensore.model.array import _values as decode_values
from tensore.model.array import column_chain, sig_bits_of, sparse_wide_chain, widen64
from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa import Descriptor, ErrorCode, Opcode, check, decode, error_code
from tensore.model.isa.check import Violation
from tensore.model.isa.enums import FP32Mode, PeReg, PsumRound, SeedMode, TileColSize, TileRowSize
from tensore.model.isa.layouts import EVENT_NONE, LUT_ENTRIES, NUM_EVENTS
from tensore.model.isa.microop import (ARRAY_ROWS, GROUPS, KIND_OF, MAX_PACK, MX_BLOCK, MX_TILE, SEED_COLS,
                                       SEED_STATES, Kind, MicroOp, MmKind, MxOrder, Pattern, full_cols, microop,
                                       pack_of, psum_half, region_of, row_tile, seed_mode, transposes)
from tensore.model.psum import Psum
from tensore.model.regs import RegisterFile
from tensore.model.sbuf import Sbuf
from tensore.model.timing import (DEFAULT_PROFILE, DEFAULT_SBUF_LATENCY, FIFO_DEPTH, MAX_IN_FLIGHT, PERF_BANKS,
                                  PERF_COUNTERS, ArrayTiming, blocks_overlap, column_groups, column_load,
                                  column_load_end, column_load_issue, column_port_free, column_write, floor_cycles, in_rhythm,
                                  load_complete, load_front_issue, load_port_free, mm_port_free, seed_transpose_issue,
                                  sparse_end, tile_span, weights_swapped, write_cycle)
from tensore.model.timing import profile as timing_profile
from tensore.model.trace import Event, Trace, WriteBlock

E = ErrorCode
TRACE_MODES = ("detailed", "aggregate")


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
    fault: ErrorCode = ErrorCode.NONE   # an error the issued micro-op reported (D-T38 (6)), at t_complete

    @property
    def name(self) -> str:
        return self.desc.op.name.lower() if isinstance(self.desc.op, Opcode) else f"0x{self.desc.op:02x}"


class Weights:
    """One plane of PE weight registers (active or shadow): values and codes per pack slot."""

    def __init__(self, rows: int, cols: int):
        self.val = np.zeros((rows, cols, MAX_PACK))
        self.code = np.zeros((rows, cols, MAX_PACK), np.uint32)
        self.dtype = np.zeros((rows, cols), np.int16)          # Dtype code of the load, 0 = never loaded
        self.pack = np.ones((rows, cols), np.int8)
        self.scale = np.zeros((rows, cols))                    # E8M0 exponent of the MX block (NaN: NaN scale)

    def copy_from(self, other: "Weights", mask: np.ndarray):
        every = bool(mask.all())
        for name in ("val", "code", "dtype", "pack", "scale"):
            dst = getattr(self, name)
            np.copyto(dst, getattr(other, name), where=True if every else
                      mask.reshape(mask.shape + (1,) * (dst.ndim - 2)))


def _run(idx: np.ndarray):
    """idx as a slice when it is a run of consecutive indices, ascending or descending (numpy
    moves a slice fastest), else idx itself."""
    n = idx.size
    if n and idx[0] >= 0 and (idx == idx[0] + np.arange(n)).all():
        return slice(int(idx[0]), int(idx[0]) + n)
    if n and idx[0] - n >= -1 and (idx == idx[0] - np.arange(n)).all():
        return slice(int(idx[0]), int(idx[0]) - n if idx[0] >= n else None, -1)
    return idx


def _in_order(codes: np.ndarray, order: np.ndarray) -> np.ndarray:
    """codes[:, order] (order [vectors, pack] element indices): a view when order is the pattern order."""
    if np.array_equal(order.reshape(-1), np.arange(order.size)):
        return codes[:, :order.size].reshape(codes.shape[0], *order.shape)
    return codes[:, order]


def _distinct(x: np.ndarray) -> np.ndarray:
    """np.unique(x), with the common case of one value found in two reductions."""
    if x.size and x.min() == x.max():
        return x.reshape(-1)[:1].copy()
    return np.unique(x)


@dataclass(frozen=True)
class _Cells:
    """What one matmul writes to PSUM (Engine._write_results): column c goes to partition part[c]
    in column half slot[c], vector v of half s to byte offset offs[v + s * V], cells of esize bytes;
    data[c, v] is the value (or with `raw` the bit pattern) written."""
    part: np.ndarray
    slot: np.ndarray
    offs: np.ndarray
    esize: int
    out_dtype: Dtype
    accumulate: bool
    data: np.ndarray
    raw: bool


@dataclass(eq=False)
class _Writes:
    """One matmul's PSUM actions, cycles `first` (its zeroing) to `last`, pending until no other
    micro-op can come between them (Engine._flush)."""
    op: OpRecord
    cells: _Cells
    vectors: int
    timing: ArrayTiming
    col0: int
    first: int
    last: int
    zero: tuple | None                  # (partitions, first bank, banks) cleared in cycle `first`
    grid: np.ndarray | None             # aggregate: the stored bits [C, V]
    events: list = field(default_factory=list)      # detailed: an Event per write, logged when all are made
    halves: tuple | None = None         # _halves, once computed
    steps: object = None                # the started Engine._write_diagonals generator
    key: tuple | None = None            # the key of its next action (None: all made)


def _halves(x: _Writes) -> tuple:
    """(partition, half-word, 2 x cycle + 1) of every PSUM half-word x's writes store (cached)."""
    if x.halves is None:
        k, vectors = x.cells, x.vectors
        c, v = np.arange(k.part.size)[:, None], np.arange(vectors)[None, :]
        shape = (k.part.size, vectors)
        p = np.broadcast_to(k.part[:, None], shape).ravel()
        h = (k.offs[v + k.slot[:, None] * vectors] // 2).ravel()
        t = np.broadcast_to(2 * x.timing.write_cycle(x.col0 + c, v) + 1, shape).ravel()
        x.halves = (np.concatenate([p, p]), np.concatenate([h, h + 1]), np.concatenate([t, t])) \
            if k.esize == 4 else (p, h, t)
    return x.halves


def _zones(x: _Writes) -> list:
    """(partitions [P, 1], half-word slice) of each bank x zeroes."""
    if x.zero is None:
        return []
    parts, bank, banks = x.zero
    per = addrmap.PSUM_BANK_BYTES // 2
    return [(parts[:, None], slice(b * per, (b + 1) * per))
            for b in ((bank + i) % addrmap.PSUM_BANKS for i in range(banks))]


def _box(x: _Writes) -> tuple:
    """(first partition, last, first byte, end byte) x's writes fall in."""
    k = x.cells
    if not k.part.size or not x.vectors:
        return (0, -1, 0, 0)
    return int(k.part.min()), int(k.part.max()), int(k.offs.min()), int(k.offs.max()) + k.esize


def _zone_boxes(x: _Writes) -> list:
    return [(int(parts.min()), int(parts.max()), z.start * 2, z.stop * 2) for parts, z in _zones(x)]


def _apart(a: tuple, b: tuple) -> bool:
    """Two boxes of PSUM (partitions, bytes) share nothing."""
    return a[1] < b[0] or b[1] < a[0] or a[3] <= b[2] or b[3] <= a[2]


def check_array(gen, rows: int, cols: int) -> None:
    """The one size rule of an engine (the golden model's and every command's): rows a multiple of
    GROUPS up to ARRAY_ROWS, columns a multiple of GROUPS (MAVERICK: whole groups in each column half)
    up to the generation's full width; else a ValueError."""
    full = full_cols(gen)
    step = 2 * GROUPS if Gen.parse(gen).layout == Gen.MAVERICK else GROUPS
    if not (GROUPS <= rows <= ARRAY_ROWS and rows % GROUPS == 0 and GROUPS <= cols <= full and cols % step == 0):
        raise ValueError(f"array {rows}x{cols}: rows must be a multiple of {GROUPS} up to {ARRAY_ROWS}, "
                         f"columns a multiple of {step} up to {full}")


class Engine:
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
        offs = pat.elements(count)
        loc = addrmap.locate(pat.addr)
        parts = loc.partition + np.arange(partitions)
        if esize_bits == 4:
            nib = loc.offset * 2 + offs
            byte = self.sbuf.gather(parts, nib >> 1, 1)
            codes = (byte >> ((nib & 1) * 4).astype(np.uint64)) & 0xF
        else:
            codes = self._gather(parts, loc.offset + offs * (esize_bits // 8), esize_bits // 8)
        return codes[:, :count], loc.partition

    def _gather(self, parts: np.ndarray, offsets: np.ndarray, esize: int) -> np.ndarray:
        """Sbuf.gather of consecutive partitions at offsets of one alignment mod esize, as unsigned
        integers of esize bytes: through a little-endian typed view of those rows (one index per
        element, not per byte)."""
        data = self.sbuf.data
        r = int(offsets[0]) % esize if offsets.size else 0
        width = (data.shape[1] - r) // esize
        inside = parts.size and offsets.size and offsets.min() >= 0 and offsets.max() + esize <= data.shape[1] and \
            parts[-1] < data.shape[0] and not ((offsets - r) % esize).any()
        if not inside:
            return self.sbuf.gather(parts, offsets, esize)
        rows = data[parts[0]:parts[-1] + 1, r:r + width * esize].view(f"<u{esize}")
        return np.array(rows[:, _run((offsets - r) // esize)], f"u{esize}")

    def _read_scales(self, pat: Pattern, blocks: int, pack: int, count: int) -> np.ndarray:
        """E8M0 exponents [blocks, count]: block b's scales are bytes at scale_addr's offset in
        partition scale_addr + b * (32 / pack), one per vector or column (D-T25).  No scales: every
        exponent 0."""
        if pat.scale_addr is None:
            return np.zeros((blocks, count))
        loc = addrmap.locate(pat.scale_addr)
        parts = loc.partition + np.arange(blocks) * (MX_BLOCK // pack)
        return dt.e8m0_exponents(self.sbuf.gather(parts, loc.offset + np.arange(count), 1))

    def _to_values(self, codes: np.ndarray, dtype, lut: bool):
        """(values, codes as stored, dtype of the values) with the LUT mode applied (D-T15)."""
        if lut:
            idx = codes.astype(np.intp)
            return self.lut[idx], self.lut_codes[idx], self.lut_dtype
        narrow = {8: np.uint8, 16: np.uint16}.get(self._width(dtype))
        if narrow is not None and codes.dtype != narrow and codes.size and not int(codes.max()) >> self._width(dtype):
            codes = codes.astype(narrow)                                      # decode_values: one table look-up
        return decode_values(codes, dtype, self.gen, self.e4m3), codes, Dtype(dtype)

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
        self._log: list = []
        self._pe_log = []
        self._current_of = {}                           # the host may have changed the weights
        ops = [OpRecord(i, d) for i, d in enumerate(descs)]
        depth = FIFO_DEPTH[self.regs.get("queue_cfg", "fifo_size_sel")]
        self._state = {"last_issue": -10 ** 9, "all_complete": -1, "lw_port": 0, "lw_end": 0, "lw_skew": 0,
                       "mm_port": [0] * (self.rows // self.tile), "tile_mm": [None] * (self.rows // self.tile),
                       "last_lw": -10 ** 9, "last_mm": None, "last_ldtags": -10 ** 9, "mm_floor": None,
                       "last_sparse_end": -10 ** 9, "consumed": {}, "barrier_complete": -1,
                       "completions": []}
        stalled = None
        self._pending: list[_Writes] = []
        self._errors: list = []                         # (cycle, after issue, code, opcode), applied in cycle order
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
            self._flush(write_cycle(t + self.sbuf_latency, self.tile, 1, 0, 0))     # the earliest write from t on
            self._execute(op)
            self._state["last_issue"] = t
            self._state["all_complete"] = max(self._state["all_complete"], op.t_complete)
            bisect.insort(self._state["completions"], op.t_complete)          # kept sorted
            if op.uop.barrier:
                self._state["barrier_complete"] = op.t_complete
            self._complete(op)
        self._flush(float("inf"))
        self._error_status()
        return Trace(self.gen, self.rows, self.cols, ops, self._log, stalled, self._pe_log, len(descs))

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
                out.append(Violation(E.BAD_MX, "perf_mode", f"weights were loaded {int(packs[0])} per PE, "
                                     f"the matmul streams {pack_of(d)}"))
        return out

    def _reg_value(self, d) -> int:
        if self.regs.get("queue_cfg", "bypass_peregwrite_instr"):
            return d.fields["value"]
        src = d.fields["src_mem_pattern"]
        loc = addrmap.locate(src["start_addr"])
        return int(self.sbuf.gather([loc.partition], [loc.offset], 4)[0, 0])

    # -- scheduling (docs/timing.md) --------------------------------------------------------------
    def _last_mm(self, block, front, port, **mm):
        """The last matmul's timing for the issue rules (docs/timing.md); `t_complete` is the latest
        completion of every matmul so far: the array changes its rhythm only once all have drained.
        Each row tile of its `block` keeps it as its own last matmul (`front`: ArrayTiming.front, for
        the loads' rules) and its moving port busy until `port` (D-T100)."""
        st = self._state
        prev = st["last_mm"]
        if prev is not None:
            mm["t_complete"] = max(mm["t_complete"], prev["t_complete"])
        st["last_mm"] = mm
        for i in self._tiles(block):
            st["tile_mm"][i] = dict(mm, t_data=front)
            st["mm_port"][i] = port

    def _tiles(self, block) -> range:
        """The row tiles a PE block (row0, rows, ...) covers."""
        return range(block[0] // self.tile, -(-(block[0] + block[1]) // self.tile))

    def _set_floor(self, op: OpRecord, vectors: int, passes: int):
        """The public profile's issue floor after a matmul issued now (timing.floor_cycles, D-T98)."""
        if self.timing.issue_floor:
            u = op.uop
            at = op.t_issue + floor_cycles(u.mmkind == MmKind.XPOSE, u.rows, u.cols, vectors, passes,
                                           lambda c, a, b: a if c else b)
            self._state["mm_floor"] = (at, u.block)

    def _earliest_issue(self, op: OpRecord):
        st, d, u = self._state, op.desc, op.uop
        t = op.t_decode + 1
        if self.regs.get("arr_cluster_cfg", "en_inter_instr_dly"):
            t = max(t, st["last_issue"] + 1 + self.regs.get("arr_cluster_cfg", "inter_instr_dly_cnt"))
        t = max(t, st["barrier_complete"] + 1)      # nothing overtakes a barrier
        serial = self.regs.get("queue_cfg", "disable_dependency_check") or u.barrier
        mm = st["last_mm"]
        fronts = [f for f in (st["tile_mm"][i] for i in self._tiles(u.block)) if f is not None]  # its tiles' last
        if serial:
            t = max(t, st["all_complete"] + 1)
        elif u.kind == Kind.LOAD and self._column(u):
            # the column-serial port (D-T99): a load of another skew follows a matmul of other passes,
            # which waited for the previous load's end, so the port's own rule suffices
            t = max(t, st["lw_port"], *(column_load_issue(f["t_data"], self._skew(), u.row0, u.col0, u.cols,
                                                          self.sbuf_latency) for f in fronts))
        elif u.kind == Kind.LOAD:
            t = max(t, st["lw_end"])
            for f in fronts:
                if self.timing.row_wavefront and d.op != Opcode.LDTAGS:
                    t = max(t, load_front_issue(f["t_data"], f["passes"], u.row0, u.rows, self.cols, self.sbuf_latency))
                else:                    # every PE of the last matmul has swapped before a shadow write
                    t = max(t, weights_swapped(f["t_data"], f["passes"], self.rows, self.cols) - self.sbuf_latency)
            if d.op == Opcode.LDTAGS:
                t = max(t, st["last_sparse_end"])
        else:                            # matmuls
            lw = st["last_lw"] + 1 if st["lw_skew"] in (0, u.passes) else st["lw_end"]   # 0: a row-serial load
            ports = [st["mm_port"][i] for i in self._tiles(u.block)] if u.kind == Kind.MATMUL else st["mm_port"]
            t = max(t, *ports, lw, st["last_ldtags"] + 1)
            if mm is not None and (mm["passes"] != u.passes or mm["kind"] != u.mmkind):
                t = max(t, mm["t_complete"] + 1)
            floor = st["mm_floor"]
            if u.kind == Kind.MATMUL and floor is not None and blocks_overlap(floor[1], u.block):
                t = max(t, floor[0])     # the public issue floor (D-T98)
        done = st["completions"]
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

    def _column(self, u) -> bool:
        """Whether a load takes the column-serial port (timing.column_load under column_loads, D-T99)."""
        return self.timing.column_loads and bool(column_load(u.op == Opcode.LDTAGS, u.tagw, u.xpose, u.mx, u.lut,
                                                                          u.lcf))

    def _skew(self) -> int:
        """A column-serial load's row skew: the passes of the matmul whose swap front it follows."""
        mm = self._state["last_mm"]
        return 1 if mm is None else mm["passes"]

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
                codes, _ = self._read_codes(u.src, rows, cols * pack, bits)
                grid = _in_order(codes, self._element_order(u, cols))               # [rows, cols, pack]
            if u.tagw:
                self.tags[row0:row0 + rows, phys] = (grid[:, :, 0] >> 16).astype(np.uint8) & 0xF
                if self.record_pe:
                    self._pe_log.append({"kind": "tags", "op": op.index, "t": t, "latency": L, "row0": row0,
                                         "rows": rows, "phys": phys, "tags": self.tags[sl, phys].copy()})
                grid = grid & 0xFFFF
            vals, stored, vdtype = self._to_values(grid, dtype, u.lut)
            scales = np.zeros((rows, cols))
            if u.mx:
                blocks = -(-rows * pack // MX_BLOCK)        # a last partial block has a scale too
                s = self._read_scales(u.src, blocks, pack, cols)             # [blocks, cols]
                scales = s[(np.arange(rows) * pack) // MX_BLOCK]
        sh, cs = self.shadow, _run(phys)
        sh.val[sl, cs, :pack] = widen64(vals)
        sh.val[sl, cs, pack:] = 0
        sh.code[sl, cs, :pack] = stored
        sh.code[sl, cs, pack:] = 0
        sh.dtype[sl, cs] = int(vdtype)
        sh.pack[sl, cs] = pack
        sh.scale[sl, cs] = scales
        self.pending[sl, cs] = True
        self._current_of = {}
        if self.record_pe:
            self._pe_log.append({"kind": "lw", "op": op.index, "t": t, "latency": L, "row0": row0, "rows": rows,
                                 "phys": np.asarray(phys), "codes": stored.astype(np.uint32), "dtype": int(vdtype),
                                 "pack": pack, "scales": scales})
        st = self._state
        if identity is None and self._column(u):
            skew, groups = self._skew(), column_groups(cols)
            for k in range(rows):
                self._emit(column_write(t, skew, k, 0, L), "shadow_write", op.index, row=row0 + k, groups=groups,
                           col0=col0, skew=skew)
            st["lw_end"] = column_load_end(t, skew, rows, cols)
            st["lw_port"], st["lw_skew"] = column_port_free(t, skew, cols), skew
            op.t_complete = st["lw_end"] - 1 + L
        else:
            for k in range(rows):
                self._emit(t + k + L, "shadow_write", op.index, row=row0 + k)
            op.t_complete = load_complete(t, rows, L)
            st["lw_port"] = st["lw_end"] = load_port_free(t, rows)
            st["lw_skew"] = 0
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
        self._state["lw_port"] = self._state["lw_end"] = load_port_free(t, rows)
        self._state["lw_skew"] = 0
        self._state["last_ldtags"] = t

    def _pe_reg_write(self, op: OpRecord):
        """The register takes the immediate at issue (bypass; `check` refused a bad one at decode) or
        the SBUF word at t + L; a fetched word the register does not take leaves it unchanged and
        reports BAD_REGISTER in that cycle (seed 000 section 10, D-T31, D-T38 (6))."""
        d = op.desc
        value = self._reg_value(d)
        when = op.t_issue + (0 if self.regs.get("queue_cfg", "bypass_peregwrite_instr") else self.sbuf_latency)
        op.t_complete = when
        if d.fields["reg"] == PeReg.PSUM_ROUND:
            if value not in (PsumRound.RNE, PsumRound.SR):
                return self._fault(op, when, E.BAD_REGISTER, f"PSUM_ROUND value {value:#x} from SBUF")
            self.psum.round_mode = PsumRound(value)
        self._emit(when, "reg", op.index, reg=int(d.fields["reg"]), value=value)

    def _conv_lut_load(self, op: OpRecord):
        u = op.uop
        n = op.desc.fields["num_entries"]
        codes, _ = self._read_codes(u.src, 1, n, self._width(u.dtype))
        self.lut_codes[:n] = codes[0]
        self.lut[:n] = widen64(dt.to_fp32(codes[0], u.dtype, self.gen))
        self.lut_dtype = u.dtype
        op.t_complete = op.t_issue + self.sbuf_latency
        self._emit(op.t_complete, "lut", op.index, entries=n)

    def _matmul(self, op: OpRecord):
        d, f, t, u = op.desc, op.desc.fields, op.t_issue, op.uop
        row0, rows, col0, cols = u.block
        if u.seed:
            return self._seed_matmul(op, u.seed)
        timing = ArrayTiming(t + self.sbuf_latency, tile_span(rows, self.tile), u.passes, row0) \
            if self.timing.row_tiles else ArrayTiming(t + self.sbuf_latency, self.rows, u.passes)
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
        st_dtypes = [Dtype(c) for c in _distinct(w.dtype[wsl]).tolist() if c]
        if d.op == Opcode.MATMUL_SPARSE:
            fm = u.src.nums[3]
            codes, _ = self._read_codes(u.src, rows, n_vec, self._width(dtype))
            a_vals, a_codes, a_dtype = self._to_values(codes.reshape(rows, fm, n_vec // fm), dtype, u.lut)
            wide = sig_bits_of(a_dtype) + max((sig_bits_of(s) for s in st_dtypes), default=0) > 24
            result = self._sparse_chain(w_vals[:, 0], a_vals, self.tags[wsl] & 3, partials=self.record_pe,
                                        fp32_mode=u.fp32_mode, wide=wide)
            n_vec //= fm
            if self.record_pe:
                result, steps = result
                self._pe_log.append({"kind": "mm", "op": op.index, "timing": timing, "row0": row0, "col0": col0,
                                     "rows": rows, "cols": cols, "pack": fm, "steps": steps, "a": a_vals,
                                     "a_codes": np.asarray(a_codes, np.uint32), "a_dtype": int(a_dtype),
                                     "fp32_mode": int(u.fp32_mode), "mx": False, "sa": np.zeros((rows, n_vec)),
                                     "fmaps": fm,
                                     "w_code": self.active.code[:, :, 0].copy(), "swapped": self._last_swap})
        else:
            bits = 4 if u.mx and dtype in (Dtype.FP4_EXP2, Dtype.INT4) else self._width(dtype)
            codes, _ = self._read_codes(u.src, rows, n_vec * pack, bits)
            moving = _in_order(codes, self._element_order(u, n_vec)).transpose(0, 2, 1)      # [rows, pack, N]
            a_vals, a_codes, a_dtype = self._to_values(moving, dtype, u.lut)
            scales = None
            sa_rows = np.zeros((rows, n_vec))
            if u.mx:
                blocks = -(-rows * pack // MX_BLOCK)        # a last partial block has a scale too
                sa = self._read_scales(u.src, blocks, pack, n_vec)
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

    def _sparse_chain(self, w, a, fmap, partials=False, fp32_mode=FP32Mode.NONE, wide=False):
        """MatmulSparse chain: PE (r, c) multiplies by moving[r, fmap[r, c], n]; a fmap beyond the
        F sent contributes nothing (D-T26).  Wide products (FP32 operands or LUT entries) take
        fp32_mode's passes as Matmul does (D-12, array.sparse_wide_chain); narrower products are
        <= 22 bits: the float64 add is exact."""
        from tensore.model.mac import canonical_nan
        if wide:
            psum, steps = sparse_wide_chain(w, a, fmap, fp32_mode, partials)
            return (canonical_nan(psum), [canonical_nan(s) for s in steps]) if partials else canonical_nan(psum)
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
            self._current_of = {}
            self._emit(timing.pe_cycle(row0, col0, 0), "swap", op.index, rows=(row0, row0 + rows),
                       cols=(col0, col0 + cols))

    def _dst_offsets(self, u: MicroOp, count: int) -> tuple[int, np.ndarray, int]:
        """(first partition, byte offsets of the dst elements, cell bytes)."""
        esize = 2 if u.out_bf16 else 4
        loc = addrmap.locate(u.dst.addr)
        offs = loc.offset + u.dst.elements() * esize
        return loc.partition, offs[:count], esize

    def _write_results(self, op, timing, *, values=None, raw=None, vectors, ncols, col0):
        """The PSUM writes of one matmul (column c, vector v: values[c, v], or the bit patterns
        raw[c, v]), pending until Engine._flush makes them; their cycles and completion now."""
        d, u = op.desc, op.uop
        half = self._half()
        p0, offs, esize = self._dst_offsets(u, vectors * (2 if ncols > half and self.maverick else 1))
        c = np.arange(ncols)
        slot = c // half if self.maverick else np.zeros(ncols, int)
        part = p0 + (c % half if self.maverick else c)
        first_write = timing.write_cycle(col0, 0)
        zero = (np.unique(part), int(offs[0] // addrmap.PSUM_BANK_BYTES) if offs.size else 0, u.zero_banks) \
            if u.zero_banks else None
        cells = _Cells(part, slot, offs, esize, Dtype.BFLOAT16 if u.out_bf16 else Dtype.FP32,
                       u.accumulate and raw is None, values if raw is None else raw, raw is not None)
        last = timing.write_cycle(col0 + ncols - 1, vectors - 1) if ncols and vectors else first_write
        grid = np.zeros((ncols, vectors), np.uint32) if self.aggregate else None
        self._pending.append(_Writes(op, cells, vectors, timing, col0, first_write, last, zero, grid))
        op.psum_writes += ncols * vectors
        done_at = last if self.regs.get("arr_cluster_cfg", "matmul_done_last") else first_write
        self._emit(done_at, "matmul_done", op.index)
        self.regs.add("matmul_done_count", "count")
        op.t_complete = last
        self._set_floor(op, vectors, timing.passes)
        self._last_mm(u.block, timing.front, mm_port_free(op.t_issue, vectors, timing.passes), t_data=timing.t_data,
                      passes=timing.passes, t_complete=last, kind=u.mmkind, t_issue=op.t_issue)
        if d.op == Opcode.MATMUL_SPARSE:
            self._state["last_sparse_end"] = sparse_end(op.t_issue, vectors, self.cols)

    # -- PSUM actions in cycle order ----------------------------------------------------------------
    def _flush(self, horizon):
        """Make the pending PSUM actions no micro-op issued from now on can precede (its writes come
        at `horizon` or later), in cycle order across micro-ops as hardware makes them: in one cycle
        the zeroing, then the writes in program order, slot 0 before slot 1 (D-T40 (6)).  The oldest
        pending matmul goes whole where that keeps the order (_commutes), else the actions of the
        matmuls overlapping it interleave by cycle up to its last (_merge)."""
        pend = self._pending
        while pend and pend[0].last < horizon:
            w = pend[0]
            later = [x for x in pend[1:] if x.first <= w.last]
            if w.steps is None and all(x.steps is None for x in later) and self._commutes(w, later):
                self._whole(w)
            else:
                self._merge([w] + later, w.last)
            pend.pop(0)
            self._log.extend(w.events)
            if w.grid is not None and w.grid.size:
                k = w.cells
                self._log.append(WriteBlock(w.op.index, k.part, k.slot, k.offs, w.grid, w.timing, w.col0, k.esize))

    def _whole(self, w: _Writes):
        """All of w's actions: one vectorised write per column half (aggregate, writes that commute)."""
        if w.grid is not None and w.grid.size and self._independent(w.cells):
            if w.zero is not None:
                self._zero(w)
            w.grid[...] = self._write_whole(w.cells, w.vectors)
            return
        for _ in self._write_diagonals(w):
            pass

    def _merge(self, items: list, bound):
        """The actions of `items` up to cycle `bound`, in key order (_write_diagonals)."""
        heap = []
        for i, x in enumerate(items):
            if x.steps is None:
                x.steps = self._write_diagonals(x)
                x.key = next(x.steps, None)
            if x.key is not None:
                heap.append((x.key, i))
        heapq.heapify(heap)
        while heap and heap[0][0][0] <= bound:
            i = heapq.heappop(heap)[1]
            x = items[i]
            x.key = next(x.steps, None)
            if x.key is not None:
                heapq.heappush(heap, (x.key, i))

    def _commutes(self, w: _Writes, later: list) -> bool:
        """Whether w's actions made before those of the `later` matmuls (program order) keep cycle
        order: every PSUM half-word w and one of them both write or zero is w's first.  Only
        matmuls whose own writes commute (_independent) are compared; others interleave."""
        if not later:
            return True
        if not all(self._independent(x.cells) for x in (w, *later)):
            return False
        return all(self._first(w, x) for x in later)

    def _first(self, w: _Writes, x: _Writes) -> bool:
        """_commutes for one later x: by the boxes of PSUM they touch, or x writing w's cells
        later (a K tile onto the one before), else half-word by half-word."""
        wb, xb = _box(w), _box(x)
        writes = _apart(wb, xb) or (x.col0 == w.col0 and x.timing.passes == w.timing.passes and
                                    x.timing.t_data >= w.timing.t_data and x.vectors == w.vectors and
                                    x.cells.esize == w.cells.esize and np.array_equal(x.cells.part, w.cells.part) and
                                    np.array_equal(x.cells.slot, w.cells.slot) and
                                    np.array_equal(x.cells.offs, w.cells.offs))
        zero_x = w.last < x.first or all(_apart(wb, z) for z in _zone_boxes(x))
        zero_w = x.first >= w.first or all(_apart(z, xb) for z in _zone_boxes(w))
        return (writes and zero_x and zero_w) or self._first_by_halves(w, x)

    def _first_by_halves(self, w: _Writes, x: _Writes) -> bool:
        """_first half-word by half-word: x's first touch (2 t for its zeroing, 2 t + 1 for a write
        in cycle t) is after w's on each."""
        if self._touch is None:
            self._touch = np.full((addrmap.PARTITIONS, addrmap.PSUM_PARTITION_BYTES // 2), np.iinfo(np.int64).max)
        touch, zones = self._touch, _zones(x)
        p, h, t = _halves(x)
        touch[p, h] = t
        for parts, zone in zones:
            touch[parts, zone] = np.minimum(touch[parts, zone], 2 * x.first)
        pw, hw, tw = _halves(w)
        ok = bool((touch[pw, hw] >= tw).all()) and all(touch[parts, zone].min() >= 2 * w.first
                                                       for parts, zone in _zones(w))
        touch[p, h] = np.iinfo(np.int64).max
        for parts, zone in zones:
            touch[parts, zone] = np.iinfo(np.int64).max
        return ok

    def _zero(self, w: _Writes):
        parts, bank, banks = w.zero
        self.psum.zero_banks(parts, bank, banks)
        self._emit(w.first, "psum_zero", w.op.index, partitions=(int(parts.min()), int(parts.max())),
                   bank=bank, banks=banks)

    def _store(self, k: _Cells, part, offs, sel) -> np.ndarray:
        """One PSUM write per (partition, offset) pair, partitions distinct (or a [P, 1] column of
        distinct partitions against [1, V] offsets): the stored bits, uint32."""
        data = k.data[sel]
        if k.raw:
            if k.esize == 2:
                self.psum.cells(2)[part, offs // 2] = data.astype(np.uint16)
            else:
                self.psum.write_raw32(part, offs, data)
            return data
        return self.psum.write(part, offs, data, out_dtype=k.out_dtype, accumulate=k.accumulate)

    def _write_diagonals(self, w: _Writes):
        """w's actions in cycle order, a generator: it yields each action's key (cycle, 0 for the
        zeroing or 1 for writes, op, column half) and then makes it.  The zeroing, then one
        anti-diagonal (c + v = step) of a column half per cycle (column c, vector v is written in
        timing.write_cycle(col0 + c, v)): an Event each in w.events, or (aggregate) the bits in w.grid."""
        op, k, vectors = w.op.index, w.cells, w.vectors
        if w.zero is not None:
            yield (w.first, 0, op, 0)
            self._zero(w)
        c = np.arange(k.part.size)
        for step in range(vectors + c.size - 1):
            cycle = w.timing.write_cycle(w.col0 + step, 0)            # every (c, v) with c + v = step
            for s in (0, 1) if self.maverick else (0,):
                cc = c[(k.slot == s) & (c <= step) & (step - c < vectors)]
                if not cc.size:
                    continue
                yield (cycle, 1, op, s)
                vv = step - cc
                o = k.offs[vv + s * vectors]
                bits = self._store(k, k.part[cc], o, (cc, vv))
                if w.grid is not None:
                    w.grid[cc, vv] = bits
                    continue
                w.events += [Event(int(cycle), "psum_write", op, {"partition": pi, "offset": oi, "bits": int(bi),
                                                                   "bytes": k.esize})
                             for pi, oi, bi in zip(k.part[cc].tolist(), o.tolist(), bits.tolist())]

    def _independent(self, k: _Cells) -> bool:
        """Every write of the matmul is to its own cell and rounds without state (not SR into bf16):
        the writes commute, so one vectorised write per column half gives the bits of the cycle order."""
        sr = k.out_dtype == Dtype.BFLOAT16 and not k.raw and self.psum.round_mode == PsumRound.SR
        return not sr and (bool((np.diff(k.offs) > 0).all()) or np.unique(k.offs).size == k.offs.size)

    def _write_whole(self, k: _Cells, vectors) -> np.ndarray:
        """_write_diagonals' bits [C, V] for _independent writes, one PSUM write per column half."""
        halves = [np.flatnonzero(k.slot == s) for s in ((0, 1) if self.maverick else (0,))]
        halves = [cs for cs in halves if cs.size]
        if len(halves) == 1:                            # one half: its bits are the grid
            return np.asarray(self._store(k, k.part[:, None], k.offs[None, :vectors], slice(None)), np.uint32)
        grid = np.empty((k.part.size, vectors), np.uint32)
        for s, cs in enumerate(halves):
            grid[cs] = self._store(k, k.part[cs][:, None], k.offs[s * vectors:(s + 1) * vectors][None, :], _run(cs))
        return grid

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
        self._last_mm((0, self.rows), timing.t_data, mm_port_free(t_mm, SEED_STATES, 1), t_data=timing.t_data,
                      passes=1, t_complete=op.t_complete, kind=MmKind.XPOSE, t_issue=t_mm)

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
        self._last_mm((0, self.rows), timing.t_data, mm_port_free(op.t_issue, 1, 1), t_data=timing.t_data,
                      passes=1, t_complete=last, kind=MmKind.XPOSE, t_issue=op.t_issue)
        self._set_floor(op, 1, 1)
