"""The golden engine's record of a run (model/engine/): the micro-ops, every architectural event
with its cycle, and (record_pe) the PE log.

A detailed trace holds one Event per PSUM write.  An aggregate trace (Engine(trace="aggregate"))
holds the writes of each matmul as one WriteBlock of arrays instead; `Trace.events` expands the
blocks on first use into the same Events in the same order, so every reader of a detailed trace
reads an aggregate one unchanged, and readers that need only the writes' values or cycles use
`Trace.psum_writes_of` without building an object per write."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from tensore.model.dtypes import Gen
from tensore.model.isa import ErrorCode
from tensore.model.psum import Psum
from tensore.model.timing import ArrayTiming
from tensore.model.words import plural

E = ErrorCode


@dataclass
class Event:
    cycle: int
    kind: str          # issue, refuse, error (reported after issue), complete, psum_write, psum_zero, swap,
                       # state_write, reg, matmul_done
    op: int
    data: dict = field(default_factory=dict)


@dataclass(eq=False)
class WriteBlock:
    """The PSUM writes of one matmul (or transpose) as arrays: column c of the block, vector v, for
    every c < C and v < V.  The write (c, v) goes to partition `partitions[c]`, byte offset
    `offsets[v + slot[c] * V]` (slot: the MAVERICK column half, D-01), stores `bits[c, v]` in a cell
    of `nbytes`, in cycle timing.write_cycle(col0 + c, v) (docs/timing.md).  The writes of one
    cycle (one anti-diagonal c + v) are made in order of slot, then column (Engine._write_diagonals)."""
    op: int
    partitions: np.ndarray      # [C] int
    slot: np.ndarray            # [C] int
    offsets: np.ndarray         # [V * slots] int byte offsets
    bits: np.ndarray            # [C, V] uint32
    timing: ArrayTiming
    col0: int
    nbytes: int

    @property
    def last_cycle(self) -> int:
        c, v = self.bits.shape
        return self.timing.write_cycle(self.col0 + c - 1, v - 1)

    def arrays(self, ordered: bool = False) -> tuple:
        """(cycle, partition, offset, bits) flat arrays, one entry per write: in the block's [C, V]
        order, or (ordered) in the order the engine makes the writes."""
        ncols, vectors = self.bits.shape
        if ordered:
            c, v = (x.ravel() for x in np.indices(self.bits.shape))
            order = np.lexsort((c, self.slot[c], c + v))
            c, v = c[order], v[order]
            cycle = self.timing.write_cycle(self.col0 + c, v)
            return cycle, self.partitions[c], self.offsets[v + self.slot[c] * vectors], self.bits[c, v]
        c, v = np.arange(ncols)[:, None], np.arange(vectors)[None, :]
        cycle = self.timing.write_cycle(self.col0 + c, v)
        part = np.broadcast_to(self.partitions[:, None], self.bits.shape)
        return (cycle.ravel(), part.ravel(), self.offsets[v + self.slot[:, None] * vectors].ravel(),
                self.bits.ravel())

    def events(self) -> list:
        """The writes as the Events a detailed trace holds, in the engine's order."""
        cycle, part, off, bits = (x.tolist() for x in self.arrays(ordered=True))
        return [Event(t, "psum_write", self.op, {"partition": p, "offset": o, "bits": b, "bytes": self.nbytes})
                for t, p, o, b in zip(cycle, part, off, bits)]


@dataclass(eq=False)
class Trace:
    """`log`: what the engine recorded, in the order it recorded it (Events, and WriteBlocks in an
    aggregate trace); `events`: every Event in cycle order (a cycle's PSUM zeroings first, the rest in
    log order)."""
    gen: Gen
    rows: int
    cols: int
    ops: list
    log: list
    stalled: str | None = None
    pe_log: list = field(default_factory=list)
    descriptors: int | None = None                  # the program's count (a stalled run stops short of it)

    @cached_property
    def events(self) -> list:
        """Every Event in cycle order, a cycle's PSUM zeroings before its other events (D-T40 (6): the
        zeroing, then the writes), the rest in log order; an aggregate trace's WriteBlocks expand here
        (once, on first use)."""
        out = []
        for x in self.log:
            if isinstance(x, WriteBlock):
                out.extend(x.events())
            else:
                out.append(x)
        return sorted(out, key=lambda e: (e.cycle, e.kind != "psum_zero"))

    @cached_property
    def blocks(self) -> list:
        """The WriteBlocks (aggregate traces; empty in a detailed one)."""
        return [x for x in self.log if isinstance(x, WriteBlock)]

    @cached_property
    def cycles(self) -> int:
        last = max((x.last_cycle if isinstance(x, WriteBlock) else x.cycle for x in self.log), default=-1)
        return 1 + last

    @property
    def psum_write_count(self) -> int:
        return sum(o.psum_writes for o in self.ops)

    def of_kind(self, kind: str) -> list:
        """The events of one kind, in cycle order (other kinds than psum_write without expanding blocks)."""
        if kind != "psum_write" and self.blocks and "events" not in self.__dict__:
            return sorted((x for x in self.log if isinstance(x, Event) and x.kind == kind), key=lambda e: e.cycle)
        return [e for e in self.events if e.kind == kind]

    def psum_writes_of(self, ops) -> dict:
        """{op: (cycle, partition, offset, bits)} int arrays of the PSUM writes of each listed micro-op,
        one entry per write, in no particular order (Trace.events has them in cycle order); a listed
        op without writes has empty arrays."""
        want = set(ops)
        out = {}
        for b in self.blocks:
            if b.op in want:
                out[b.op] = b.arrays()
        rest = want - set(out)
        if rest:
            rows = {op: [] for op in rest}
            for e in self.log:
                if isinstance(e, Event) and e.kind == "psum_write" and e.op in rest:
                    d = e.data
                    rows[e.op].append((e.cycle, d["partition"], d["offset"], d["bits"]))
            for op, r in rows.items():
                a = np.array(r, np.int64).reshape(-1, 4)
                out[op] = (a[:, 0], a[:, 1], a[:, 2], a[:, 3])
        return out

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

    def write_rows(self) -> np.ndarray:
        """[n, 5] int64 (cycle, partition, byte offset, bits, bytes) of every PSUM write, in the
        order of `events` (cycle, then the engine's order), an aggregate trace's blocks as arrays
        without an Event per write."""
        parts, keys, events, at = [], [], [], []
        for i, x in enumerate(self.log):
            if isinstance(x, WriteBlock):
                a = np.stack([np.asarray(v, np.int64) for v in x.arrays(ordered=True)]
                             + [np.full(x.bits.size, x.nbytes, np.int64)], axis=1)
                parts.append(a)
                keys.append(np.stack([np.full(len(a), i), np.arange(len(a))], axis=1))
            elif isinstance(x, Event) and x.kind == "psum_write":
                d = x.data
                events.append((x.cycle, d["partition"], d["offset"], d["bits"], d["bytes"]))
                at.append((i, 0))
        parts.append(np.array(events, np.int64).reshape(-1, 5))
        keys.append(np.array(at, np.int64).reshape(-1, 2))
        rows, key = np.concatenate(parts), np.concatenate(keys)
        return rows[np.lexsort((key[:, 1], key[:, 0], rows[:, 0]))]

    def summary(self, per_op: bool = True) -> str:
        """Ops, cycles and PSUM writes, then a line per micro-op (`per_op` False: only the refused and
        faulting ones)."""
        done = [o for o in self.ops if o.error == E.NONE and o.t_complete is not None]
        refused = [o for o in self.ops if o.error != E.NONE]
        count = self.descriptors if self.descriptors is not None else len(self.ops)
        unreached = f" ({count - len(self.ops)} not reached)" if count > len(self.ops) else ""
        lines = [f"{self.gen.name} {self.rows}x{self.cols}: {plural(count, 'descriptor')}{unreached}, {len(done)} "
                 f"executed, {len(refused)} refused, {plural(self.cycles, 'cycle')}, "
                 f"{plural(self.psum_write_count, 'PSUM write')}"]
        for o in self.ops:
            if o.error != E.NONE:
                why = f": {o.violations[0].detail}" if o.violations else ""
                lines.append(f"  #{o.index} {o.name}: refused {o.error.name} ({o.error.value:#04x}) at cycle "
                             f"{o.t_decode}{why}")
            elif o.t_issue is not None and (per_op or o.fault != E.NONE):
                fault = f", reported {o.fault.name}" if o.fault != E.NONE else ""
                lines.append(f"  #{o.index} {o.name}: issue {o.t_issue}, complete {o.t_complete}{fault}, "
                             f"{plural(o.psum_writes, 'PSUM write')}")
        if self.stalled:
            lines.append(f"  stalled: {self.stalled}")
        return "\n".join(lines)

