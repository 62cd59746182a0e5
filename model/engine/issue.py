"""The sequencer's scoreboard and issue rules (seed 000 section 10, docs/timing.md): when a
descriptor enters the instruction FIFO, is decoded and issues.  The state is a dict the executing
micro-ops update (`_last_mm`, `_set_floor`, the loads' port fields); the rules read it.  The
profile (model/timing.py PROFILES, D-T98) chooses the public floor, the row wavefront, the
column-serial port (D-T99) and the row tiles (D-T100)."""
from __future__ import annotations

import bisect

from tensore.model import addrmap
from tensore.model.isa import Opcode
from tensore.model.isa.layouts import EVENT_NONE
from tensore.model.isa.microop import Kind, MmKind
from tensore.model.timing import (DECODE_CYCLES, MAX_IN_FLIGHT, blocks_overlap, boxes_overlap, column_load,
                                  column_load_issue, column_port_next, entry_free, floor_cycles, in_rhythm,
                                  load_front_issue, psum_box, tap_of, tile_stream, times_passes, weights_swapped, write_lead)

from tensore.model.engine.records import OpRecord


class IssueRules:
    """The scoreboard of an Engine (`self._state`) and the cycle each micro-op issues in."""

    def _scoreboard(self) -> dict:
        """The state of the issue rules at the start of a run."""
        return {"last_issue": -10 ** 9, "all_complete": -1, "lw_port": 0, "lw_end": 0, "lw_skew": 0,
                "lw_rows": (0, 0),             # a column-serial load's (row0, rows): timing.column_port_next
                "mm_port": [0] * (self.rows // self.tile), "tile_mm": [None] * (self.rows // self.tile),
                "tap_writes": [None] * (self.rows // self.tile),      # (last write, psum_box) per tap
                "last_lw": -10 ** 9, "last_mm": None, "last_ldtags": -10 ** 9, "mm_floor": None,
                "last_sparse_end": -10 ** 9, "consumed": {}, "barrier_complete": -1,
                "completions": []}

    @staticmethod
    def _enqueue(ops: list, i: int, depth: int):
        """ops[i]'s push into the FIFO of `depth` entries and its decode: one a cycle, in order; a
        descriptor leaves the FIFO when it issues (or is refused at decode)."""
        op = ops[i]
        pop_prev = ops[i - 1].t_issue if i and ops[i - 1].t_issue is not None else \
            (ops[i - 1].t_decode if i else -1)
        op.t_push = i if i < depth else max(i, (ops[i - depth].t_issue if ops[i - depth].t_issue is not None
                                                   else ops[i - depth].t_decode) + 1)
        op.t_decode = max(op.t_push + 1, pop_prev + 1)

    def _issued(self, op: OpRecord):
        """The scoreboard after an op issued and executed: its issue and completion."""
        st = self._state
        st["last_issue"] = op.t_issue
        st["all_complete"] = max(st["all_complete"], op.t_complete)
        bisect.insort(st["completions"], op.t_complete)          # kept sorted
        if op.uop.barrier:
            st["barrier_complete"] = op.t_complete

    def _last_mm(self, stream, front, port, **mm):
        """The last matmul's timing for the issue rules (docs/timing.md); `t_complete` is the latest
        completion of every matmul so far: the array changes its rhythm only once all have drained.
        Each row tile its `stream` (entry row, span: `_stream`) crosses keeps it as its own last
        matmul (`front`: ArrayTiming.front, for the loads' rules) and its entry into the request
        chain busy until the stream has passed it: `port` (mm_port_free) at the entry row, later
        below (entry_free, D-T100)."""
        st = self._state
        prev = st["last_mm"]
        if prev is not None:
            mm["t_complete"] = max(mm["t_complete"], prev["t_complete"])
        st["last_mm"] = mm
        for i in self._tiles(stream):
            st["tile_mm"][i] = dict(mm, t_data=front)
            st["mm_port"][i] = entry_free(port, mm["passes"], i * self.tile - stream[0])

    def _stream(self, u) -> tuple:
        """(entry row, rows to the sum tap) of a matmul's moving stream: under `row_tiles`
        timing.tile_stream's, else row 0 and the array (D-T100)."""
        if self.timing.row_tiles:
            return tile_stream(u.block[0], u.block[1], u.xpose, self.rows, self.tile, _pick)
        return 0, self.rows

    def _tiles(self, block) -> range:
        """The row tiles a PE block (row0, rows, ...) covers."""
        return range(block[0] // self.tile, -(-(block[0] + block[1]) // self.tile))

    def _set_floor(self, op: OpRecord, vectors: int, passes: int):
        """The public profile's issue floor after a matmul issued now (timing.floor_cycles, D-T98)."""
        if self.timing.issue_floor:
            u = op.uop
            at = op.t_issue + floor_cycles(u.mmkind == MmKind.XPOSE, u.rows, u.cols, vectors, passes,
                                           _pick)
            self._state["mm_floor"] = (at, u.block)

    def _earliest_issue(self, op: OpRecord):
        """The cycle op issues in, or None when it waits for an event nothing sets."""
        st, d, u = self._state, op.desc, op.uop
        t = op.t_decode + DECODE_CYCLES
        if self.regs.get("arr_cluster_cfg", "en_inter_instr_dly"):
            t = max(t, st["last_issue"] + 1 + self.regs.get("arr_cluster_cfg", "inter_instr_dly_cnt"))
        t = max(t, st["barrier_complete"] + 1)      # nothing overtakes a barrier
        serial = self.regs.get("queue_cfg", "disable_dependency_check") or u.barrier
        mm = st["last_mm"]
        if serial:
            t = max(t, st["all_complete"] + 1)
        elif u.kind == Kind.LOAD:
            t = self._load_issue(op, t)
        else:
            t = self._matmul_issue(op, t)
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

    def _load_issue(self, op: OpRecord, t: int) -> int:
        """A load's rules after t: its port, and the last matmul of each row tile it writes."""
        st, d, u = self._state, op.desc, op.uop
        fronts = [f for f in (st["tile_mm"][i] for i in self._tiles(u.block)) if f is not None]  # its tiles' last
        if self._column(u):
            # the column-serial port (D-T99): a load of another skew follows a matmul of other passes,
            # which waited for the previous load's end, so the port's own rule suffices; one entering
            # below the previous one's first row lets its groups pass (timing.column_port_next)
            port = column_port_next(st["lw_port"], st["lw_end"], st["lw_skew"], *st["lw_rows"], u.row0,
                                    _pick)
            return max(t, port, *(column_load_issue(f["t_data"], self._skew(), u.row0, u.col0, u.cols,
                                                    self.sbuf_latency) for f in fronts))
        t = max(t, st["lw_end"])
        for f in fronts:
            if self.timing.row_wavefront and d.op != Opcode.LDTAGS:
                t = max(t, load_front_issue(f["t_data"], f["passes"], u.row0, u.rows, self.cols, self.sbuf_latency))
            else:                    # every PE of the last matmul has swapped before a shadow write
                t = max(t, weights_swapped(f["t_data"], f["passes"], self.rows, self.cols) - self.sbuf_latency)
        if d.op == Opcode.LDTAGS:
            t = max(t, st["last_sparse_end"])
        return t

    def _matmul_issue(self, op: OpRecord, t: int) -> int:
        """The rules after t of a matmul (and of every other micro-op but a load): the moving ports, the
        last load, a change of passes or kind, and the public floor."""
        st, u = self._state, op.uop
        mm = st["last_mm"]
        lw = st["last_lw"] + 1 if st["lw_skew"] in (0, u.passes) else st["lw_end"]   # 0: a row-serial load
        if u.kind == Kind.MATMUL:     # its stream reaches tile i's entry P * (rows above it) after issue
            stream = self._stream(u)
            ports = [st["mm_port"][i] - times_passes(i * self.tile - stream[0], u.passes)
                     for i in self._tiles(stream)]
        else:
            ports = st["mm_port"]
        t = max(t, *ports, lw, st["last_ldtags"] + 1)
        if mm is not None and (mm["passes"] != u.passes or mm["kind"] != u.mmkind):
            t = max(t, mm["t_complete"] + 1)
        floor = st["mm_floor"]
        if u.kind == Kind.MATMUL and floor is not None and blocks_overlap(floor[1], u.block):
            t = max(t, floor[0])     # the public issue floor (D-T98)
        if u.kind == Kind.MATMUL and self.timing.row_tiles:
            t = max(t, self._write_order(u, stream))
        return t

    def _write_order(self, u, stream) -> int:
        """Under row tiles (D-T100): the earliest issue whose first PSUM write follows the last write of
        the in-flight matmuls leaving at each tap below its own into its box (so a shorter matmul's
        sums, leaving higher up, do not overtake an earlier matmul's into the same cells)."""
        if u.seed:                        # a seed's states leave at the bottom
            return 0
        tap = tap_of(*stream, self.tile)
        lead = write_lead(self.sbuf_latency, stream[1], u.col0, u.passes)
        box = self._psum_box(u)
        return max((last - lead + 1 for k, w in enumerate(self._state["tap_writes"]) if k > tap and w is not None
                    for last, b in [w] if boxes_overlap(b, box)), default=0)

    def _psum_box(self, u):
        """psum_box of a matmul's destination; every cell for a micro-op without one (seeds)."""
        if u.dst is None or u.kind != Kind.MATMUL or u.seed:
            return 0, addrmap.PARTITIONS, 0, 1 << 30
        loc = addrmap.locate(u.dst.addr)
        cols = min(u.cols, self._half()) if self.maverick else u.cols
        return psum_box(loc.partition, cols, loc.offset, u.dst.steps, u.dst.nums, 2 if u.out_bf16 else 4, _pick)

    def _tap_writes(self, op: OpRecord, stream, last: int):
        """A PSUM-writing micro-op leaving at the tap below its stream: the tap's last write and box
        (the union with the tap's earlier ones still writing at its issue)."""
        if not self.timing.row_tiles:
            return
        taps = self._state["tap_writes"]
        k, box = tap_of(*stream, self.tile), self._psum_box(op.uop)
        if taps[k] is not None and taps[k][0] >= op.t_issue:
            old = taps[k][1]
            box = (min(old[0], box[0]), max(old[1], box[1]), min(old[2], box[2]), max(old[3], box[3]))
            last = max(last, taps[k][0])
        taps[k] = (last, box)

    def _column(self, u) -> bool:
        """Whether a load takes the column-serial port (timing.column_load under column_loads, D-T99)."""
        return self.timing.column_loads and bool(column_load(u.op == Opcode.LDTAGS, u.tagw, u.xpose, u.mx, u.lut,
                                                                          u.lcf))

    def _skew(self) -> int:
        """A column-serial load's row skew: the passes of the matmul whose swap front it follows."""
        mm = self._state["last_mm"]
        return 1 if mm is None else mm["passes"]


def _pick(cond, a, b):
    """`a if cond else b`: the ints backend of model/timing.py's `pick` formulas."""
    return a if cond else b
