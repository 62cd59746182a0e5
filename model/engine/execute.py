"""Execution per opcode (seed 000 section 10): what an issued micro-op does to the PE weights,
tags, LUT, registers and PSUM, and the cycles it does it in.  The values come from model.array /
model.psum, the cycles from model.timing; a matmul's PSUM writes go pending (PsumOrder._pend) and
its completion into the scoreboard (IssueRules._last_mm, _set_floor)."""
from __future__ import annotations

import numpy as np

from tensore.model import addrmap
from tensore.model import dtypes as dt
from tensore.model.array import column_chain, sig_bits_of, sparse_wide_chain, widen64
from tensore.model.dtypes import Dtype
from tensore.model.isa import ErrorCode, Opcode
from tensore.model.isa.enums import FP32Mode, PeReg, PsumRound
from tensore.model.isa.microop import MX_BLOCK, SEED_STATES, Kind, MicroOp
from tensore.model.timing import (ArrayTiming, column_groups, column_load_end, column_port_free, column_write,
                                  load_complete, load_port_free, mm_port_free, sparse_end)

from tensore.model.engine.operands import _in_order
from tensore.model.engine.records import OpRecord, _distinct, _run

E = ErrorCode


class Execution:
    """The per-opcode handlers of an Engine, run at issue (`op.t_issue` set); each sets op.t_complete."""

    def _execute(self, op: OpRecord):
        handler = {Kind.LOAD: self._ldtags if op.desc.op == Opcode.LDTAGS else self._ldweights,
                   Kind.MATMUL: self._matmul, Kind.REGWRITE: self._pe_reg_write, Kind.LUT: self._conv_lut_load,
                   Kind.SEED: self._pe_manage_seed}[op.uop.kind]
        handler(op)

    # -- weight and tag loads -------------------------------------------------------------------------
    def _ldweights(self, op: OpRecord, identity=None):
        """A weight load (or, with `identity` = (codes, dtype), the seed's identity): the shadow plane
        of its block takes the weights, pending until a matmul swaps them in (D-14)."""
        u = op.uop
        row0, rows, col0, cols = u.block
        phys = self._physical_cols(u, col0, cols) if identity is None else np.arange(cols)
        if identity is not None:
            vals, stored, vdtype, scales = self._identity_grid(rows, cols, *identity)
        else:
            vals, stored, vdtype, scales = self._load_grid(op, phys)
        self._write_shadow(op, phys, vals, stored, vdtype, scales)
        self._load_cycles(op, identity is None and self._column(u))

    def _identity_grid(self, rows: int, cols: int, codes, dtype) -> tuple:
        """(values, codes, dtype, scales) of the seed's identity: row k's code on the columns of state k."""
        grid = np.zeros((rows, cols, 1), np.uint64)
        diag = np.arange(cols) % SEED_STATES
        for k in range(rows):
            grid[k, diag == k, 0] = codes[k]
        vals, stored, vdtype = self._to_values(grid, dtype, False)
        return vals, stored, vdtype, np.zeros((rows, cols))

    def _load_grid(self, op: OpRecord, phys: np.ndarray) -> tuple:
        """(values, codes, dtype, scales) [rows, cols, pack] a load reads from SBUF; a tag-weight load
        writes its tags now (D-T26)."""
        t, u = op.t_issue, op.uop
        row0, rows, col0, cols = u.block
        pack, dtype = u.pack, u.dtype
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
                self._pe_log.append({"kind": "tags", "op": op.index, "t": t, "latency": self.sbuf_latency,
                                     "row0": row0, "rows": rows, "phys": phys,
                                     "tags": self.tags[row0:row0 + rows, phys].copy()})
            grid = grid & 0xFFFF
        vals, stored, vdtype = self._to_values(grid, dtype, u.lut)
        scales = np.zeros((rows, cols))
        if u.mx:
            blocks = -(-rows * pack // MX_BLOCK)        # a last partial block has a scale too
            s = self._read_scales(u.src, blocks, pack, cols)             # [blocks, cols]
            scales = s[(np.arange(rows) * pack) // MX_BLOCK]
        return vals, stored, vdtype, scales

    def _write_shadow(self, op: OpRecord, phys, vals, stored, vdtype, scales):
        """The shadow plane of the load's rows and physical columns takes the grid; those PEs pend."""
        u = op.uop
        row0, rows, pack = u.block[0], u.block[1], u.pack
        sl, sh, cs = slice(row0, row0 + rows), self.shadow, _run(phys)
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
            self._pe_log.append({"kind": "lw", "op": op.index, "t": op.t_issue, "latency": self.sbuf_latency,
                                 "row0": row0, "rows": rows, "phys": np.asarray(phys),
                                 "codes": stored.astype(np.uint32), "dtype": int(vdtype), "pack": pack,
                                 "scales": scales})

    def _load_cycles(self, op: OpRecord, column: bool):
        """A load's shadow writes, completion and port: row-serial (a row a cycle) or on the
        column-serial port behind the last matmul's swap front (D-T99)."""
        t, u, L, st = op.t_issue, op.uop, self.sbuf_latency, self._state
        row0, rows, col0, cols = u.block
        if column:
            skew, groups = self._skew(), column_groups(cols)
            for k in range(rows):
                self._emit(column_write(t, skew, k, 0, L), "shadow_write", op.index, row=row0 + k, groups=groups,
                           col0=col0, skew=skew)
            st["lw_end"] = column_load_end(t, skew, rows, cols)
            st["lw_port"], st["lw_skew"], st["lw_rows"] = column_port_free(t, skew, cols), skew, (row0, rows)
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

    # -- registers and the LUT ------------------------------------------------------------------------
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

    def _reg_value(self, d) -> int:
        if self.regs.get("queue_cfg", "bypass_peregwrite_instr"):
            return d.fields["value"]
        src = d.fields["src_mem_pattern"]
        loc = addrmap.locate(src["start_addr"])
        return int(self.sbuf.gather([loc.partition], [loc.offset], 4)[0, 0])

    def _conv_lut_load(self, op: OpRecord):
        u = op.uop
        n = op.desc.fields["num_entries"]
        codes, _ = self._read_codes(u.src, 1, n, self._width(u.dtype))
        self.lut_codes[:n] = codes[0]
        self.lut[:n] = widen64(dt.to_fp32(codes[0], u.dtype, self.gen))
        self.lut_dtype = u.dtype
        op.t_complete = op.t_issue + self.sbuf_latency
        self._emit(op.t_complete, "lut", op.index, entries=n)

    # -- matmuls ----------------------------------------------------------------------------------------
    def _matmul(self, op: OpRecord):
        """A matmul: its region swaps in pending weights, the moving data streams through the
        column chains (or, transposing, passes through), the sums go pending to PSUM."""
        t, u = op.t_issue, op.uop
        row0, rows, col0, cols = u.block
        if u.seed:
            return self._seed_matmul(op, u.seed)
        entry, span = self._stream(u)
        timing = ArrayTiming(t + self.sbuf_latency, span, u.passes, entry)
        self._swap(op, row0, rows, col0, cols, timing)
        if u.xpose:
            return self._transpose(op, timing)
        if op.desc.op == Opcode.MATMUL_SPARSE:
            result, n_vec = self._sparse_sums(op, timing)
        else:
            result, n_vec = self._dense_sums(op, timing)
        self._write_results(op, timing, values=result, vectors=n_vec, ncols=cols, col0=col0)

    def _transpose(self, op: OpRecord, timing: ArrayTiming):
        """A transposing matmul: element (k, n) of the moving data is written as is to partition n."""
        u = op.uop
        codes, _ = self._read_codes(u.src, u.block[1], u.src.count, self._width(u.dtype))
        bits = codes.astype(np.uint32).T                                    # [N, K]: partition n, element k
        if self.record_pe:
            self._pe_log.append({"kind": "xpose", "op": op.index, "timing": timing, "bits": bits})
        self._write_results(op, timing, raw=bits, vectors=bits.shape[1], ncols=bits.shape[0], col0=0)

    def _stationary(self, u: MicroOp) -> tuple:
        """(active values [rows, pack, cols], their dtypes, the block's slices) of a matmul's region."""
        row0, rows, col0, cols = u.block
        wsl = (slice(row0, row0 + rows), slice(col0, col0 + cols))
        w_vals = self.active.val[wsl[0], wsl[1], :u.pack].transpose(0, 2, 1)      # [rows, pack, cols]
        return w_vals, [Dtype(c) for c in _distinct(self.active.dtype[wsl]).tolist() if c], wsl

    def _sparse_sums(self, op: OpRecord, timing: ArrayTiming) -> tuple:
        """(sums [cols, N], N) of a MatmulSparse: each PE takes the feature map its tag names (D-T26)."""
        u = op.uop
        row0, rows, col0, cols = u.block
        w_vals, st_dtypes, wsl = self._stationary(u)
        n_vec, fm = u.vectors, u.src.nums[3]
        codes, _ = self._read_codes(u.src, rows, n_vec * fm, self._width(u.dtype))
        a_vals, a_codes, a_dtype = self._to_values(codes.reshape(rows, fm, n_vec), u.dtype, u.lut)
        wide = sig_bits_of(a_dtype) + max((sig_bits_of(s) for s in st_dtypes), default=0) > 24
        result = self._sparse_chain(w_vals[:, 0], a_vals, self.tags[wsl] & 3, partials=self.record_pe,
                                    fp32_mode=u.fp32_mode, wide=wide)
        if self.record_pe:
            result, steps = result
            self._pe_log.append({"kind": "mm", "op": op.index, "timing": timing, "row0": row0, "col0": col0,
                                 "rows": rows, "cols": cols, "pack": fm, "steps": steps, "a": a_vals,
                                 "a_codes": np.asarray(a_codes, np.uint32), "a_dtype": int(a_dtype),
                                 "fp32_mode": int(u.fp32_mode), "mx": False, "sa": np.zeros((rows, n_vec)),
                                 "fmaps": fm,
                                 "w_code": self.active.code[:, :, 0].copy(), "swapped": self._last_swap})
        return result, n_vec

    def _dense_sums(self, op: OpRecord, timing: ArrayTiming) -> tuple:
        """(sums [cols, N], N) of a Matmul or MatmulMx: the column chains (model.array), MX scales
        per block of 32 rows (D-T25)."""
        f, u = op.desc.fields, op.uop
        row0, rows, col0, cols = u.block
        w_vals, st_dtypes, wsl = self._stationary(u)
        pack, dtype = u.pack, u.dtype
        n_vec = u.vectors
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
            scales = (self.active.scale[wsl], sa[blk])
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
        return result, n_vec

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

    def _write_results(self, op, timing, *, values=None, raw=None, vectors, ncols, col0):
        """The PSUM writes of one matmul (column c, vector v: values[c, v], or the bit patterns
        raw[c, v]), pending until PsumOrder._flush makes them; their cycles and completion now."""
        d, u = op.desc, op.uop
        w = self._pend(op, timing, values=values, raw=raw, vectors=vectors, ncols=ncols, col0=col0)
        op.psum_writes += ncols * vectors
        done_at = w.last if self.regs.get("arr_cluster_cfg", "matmul_done_last") else w.first
        self._emit(done_at, "matmul_done", op.index)
        self.regs.add("matmul_done_count", "count")
        op.t_complete = w.last
        self._set_floor(op, vectors, timing.passes)
        self._last_mm((timing.row0, timing.rows), timing.front, mm_port_free(op.t_issue, vectors, timing.passes),
                      t_data=timing.t_data, passes=timing.passes, t_complete=w.last, kind=u.mmkind, t_issue=op.t_issue)
        self._tap_writes(op, (timing.row0, timing.rows), w.last)
        if d.op == Opcode.MATMUL_SPARSE:
            self._state["last_sparse_end"] = sparse_end(op.t_issue, vectors, self.cols)
