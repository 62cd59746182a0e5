"""Seeds of the PSUM stochastic-rounding states (seed 000 section 5): MARIANA's PeManageSeed (an
identity load, then a transposing matmul that writes or reads the states) and MAVERICK's seed
micro-op (seed 000 section 5.1 contract)."""
from __future__ import annotations

import numpy as np

from tensore.model import addrmap
from tensore.model.dtypes import Dtype
from tensore.model.isa.enums import SeedMode
from tensore.model.isa.microop import SEED_COLS, SEED_STATES, MmKind
from tensore.model.timing import ArrayTiming, mm_port_free, seed_transpose_issue

from tensore.model.engine.records import OpRecord


class Seeds:
    """The seed micro-ops of an Engine: PSUM's SR states from or to SBUF, through the array.  A seed
    micro-op is a barrier (D-T30): nothing issues before its last PSUM write, so the row tiles' write
    order rule (D-T100) never reads its writes and it records none."""

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
        timing = ArrayTiming(t_mm + L, self.rows, 1, 0)
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
        timing = ArrayTiming(op.t_issue + self.sbuf_latency, self.rows, 1, 0)
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
