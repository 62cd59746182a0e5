"""PSUM actions in cycle order (D-T40 (6)): a matmul's writes (and the zeroing of its banks) are
pending from issue until no micro-op issued later can come between them, then made in cycle order
across micro-ops as hardware makes them (PsumOrder._flush): in one cycle the zeroing, then the
writes in program order, column half 0 before 1.  A detailed trace gets an Event per write, an
aggregate one a WriteBlock per matmul (D-T77)."""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from tensore.model import addrmap
from tensore.model.dtypes import Dtype
from tensore.model.isa.enums import PsumRound
from tensore.model.isa.microop import MicroOp, psum_half
from tensore.model.timing import ArrayTiming, tap_of
from tensore.model.trace import Event, WriteBlock

from tensore.model.engine.records import OpRecord, _run


@dataclass(frozen=True)
class _Cells:
    """What one matmul writes to PSUM (PsumOrder._pend): column c goes to partition part[c]
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
    micro-op can come between them (PsumOrder._flush)."""
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
    steps: object = None                # the started PsumOrder._write_diagonals generator
    key: tuple | None = None            # the key of its next action (None: all made)
    tap: int = 0                        # the sum tap its writes leave by, of `taps` (row tiles, D-T100)
    taps: int = 1


def _halves(x: _Writes) -> tuple:
    """(partition, half-word, _touch of its write) of every PSUM half-word x's writes store (cached)."""
    if x.halves is None:
        k, vectors = x.cells, x.vectors
        c, v = np.arange(k.part.size)[:, None], np.arange(vectors)[None, :]
        shape = (k.part.size, vectors)
        p = np.broadcast_to(k.part[:, None], shape).ravel()
        h = (k.offs[v + k.slot[:, None] * vectors] // 2).ravel()
        t = np.broadcast_to(_touch(x, x.timing.write_cycle(x.col0 + c, v)), shape).ravel()
        x.halves = (np.concatenate([p, p]), np.concatenate([h, h + 1]), np.concatenate([t, t])) \
            if k.esize == 4 else (p, h, t)
    return x.halves


def _touch(x: _Writes, cycle, zero: bool = False):
    """The order of an action of x among a cycle's (D-T40 (6), D-T100): the zeroing, then the writes
    tap by tap (the row tiles' taps from the top, one tap without row tiles), each tap's in
    program order: 2 (cycle x taps + tap) + 1 for a write, 2 cycle x taps for the zeroing."""
    return 2 * cycle * x.taps if zero else 2 * (cycle * x.taps + x.tap) + 1


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


class PsumOrder:
    """The pending PSUM actions of an Engine (`self._pending`) and their making in cycle order."""

    def _pend(self, op: OpRecord, timing: ArrayTiming, *, values, raw, vectors, ncols, col0) -> _Writes:
        """One matmul's PSUM writes (column c, vector v: values[c, v], or the bit patterns raw[c, v])
        and its banks' zeroing, pending until _flush makes them."""
        u = op.uop
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
        w = _Writes(op, cells, vectors, timing, col0, first_write, last, zero, grid,
                    tap=tap_of(timing.row0, timing.rows, self.tile), taps=self.rows // self.tile)
        self._pending.append(w)
        return w

    def _dst_offsets(self, u: MicroOp, count: int) -> tuple[int, np.ndarray, int]:
        """(first partition, byte offsets of the dst elements, cell bytes)."""
        esize = 2 if u.out_bf16 else 4
        loc = addrmap.locate(u.dst.addr)
        offs = loc.offset + u.dst.elements() * esize
        return loc.partition, offs[:count], esize

    def _half(self) -> int:
        return psum_half(self.gen, self.cols)

    def _flush(self, horizon):
        """Make the pending PSUM actions no micro-op issued from now on can precede (its writes come
        at `horizon` or later), in cycle order across micro-ops as hardware makes them: in one cycle
        the zeroing, then the writes tap by tap (row tiles, D-T100), each tap's in program order,
        slot 0 before slot 1 (D-T40 (6)).  The oldest
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
                                    (x.first, x.tap) >= (w.first, w.tap) and x.vectors == w.vectors and
                                    x.cells.esize == w.cells.esize and np.array_equal(x.cells.part, w.cells.part) and
                                    np.array_equal(x.cells.slot, w.cells.slot) and
                                    np.array_equal(x.cells.offs, w.cells.offs))
        zero_x = w.last < x.first or all(_apart(wb, z) for z in _zone_boxes(x))
        zero_w = x.first >= w.first or all(_apart(z, xb) for z in _zone_boxes(w))
        return (writes and zero_x and zero_w) or self._first_by_halves(w, x)

    def _first_by_halves(self, w: _Writes, x: _Writes) -> bool:
        """_first half-word by half-word: x's first touch (_touch: its zeroing or a write) is after
        w's on each."""
        if self._touch is None:
            self._touch = np.full((addrmap.PARTITIONS, addrmap.PSUM_PARTITION_BYTES // 2), np.iinfo(np.int64).max)
        touch, zones = self._touch, _zones(x)
        p, h, t = _halves(x)
        touch[p, h] = t
        for parts, zone in zones:
            touch[parts, zone] = np.minimum(touch[parts, zone], _touch(x, x.first, zero=True))
        pw, hw, tw = _halves(w)
        ok = bool((touch[pw, hw] >= tw).all()) and all(touch[parts, zone].min() >= _touch(w, w.first, zero=True)
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
        zeroing or 1 for writes, the writes' tap, op, column half) and then makes it.  The zeroing, then one
        anti-diagonal (c + v = step) of a column half per cycle (column c, vector v is written in
        timing.write_cycle(col0 + c, v)): an Event each in w.events, or (aggregate) the bits in w.grid."""
        op, k, vectors = w.op.index, w.cells, w.vectors
        if w.zero is not None:
            yield (w.first, 0, 0, op, 0)
            self._zero(w)
        c = np.arange(k.part.size)
        for step in range(vectors + c.size - 1):
            cycle = w.timing.write_cycle(w.col0 + step, 0)            # every (c, v) with c + v = step
            for s in (0, 1) if self.maverick else (0,):
                cc = c[(k.slot == s) & (c <= step) & (step - c < vectors)]
                if not cc.size:
                    continue
                yield (cycle, 1, w.tap, op, s)
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
