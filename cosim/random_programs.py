"""Constrained-random micro-op programs (issue #18 item 3) and their shrinking.

`generate(gen, seed)` writes a program of random blocks for one generation: weight loads and matmuls
with random dtypes (moving and stationary may differ), fp32 modes, FP8 double row, load orders,
active rows / columns, access steps, destination banks and offsets, FP32 or BF16 cells, accumulate
flags and zero regions, tiles (row / column groups, MAVERICK tile selects), transposes; LdTags + MatmulSparse with 2-4 fmaps; MX matmuls with E8M0 scales
(MARIANA LdweightsMX / MatmulMX, MAVERICK MXTensorV2 quad and oct rows); ConvLutLoad + LUT mode;
PeRegWrite of the PSUM rounding (RNE / SR); events set by one micro-op and waited for by a later one;
illegal descriptors (a legal one with a random byte changed until `model.isa.check` refuses it, or an
opcode the generation lacks) mixed in; random queue / delay registers.  SBUF data is a mix of normal
values, special values (NaN, Inf, subnormals, +-0, max) and random codes.  The expectations are the
golden engine's: every PSUM bank of the array's partitions and the refused descriptors.

`shrink(program, fails)` minimises a program for which `fails(program)` is true: delta debugging
(ddmin) over its descriptors, then over each descriptor's numeric fields (towards 0 / 1 / half), then
its register writes; `save` / `load` write and read a reproducer (`.s` + `.npz`, the `.npz` usable
with `tensore run --sbuf`).

After its blocks a program gets `extras` blocks drawn from a second random stream, so that the
blocks of a seed stay what they were (D-T73): seed moves (MARIANA PeManageSeed, MAVERICK seed_mode
matmuls), transposed weight loads, TAG_WEIGHT loads with MatmulSparse, matmuls along 2-D source and
destination patterns, loads and matmuls in any row / column group, transposes of every element
width, MX with FP8 E3M4 elements, LUT-mode moving codes, illegal mutants of any block; and random
bypass_peregwrite_instr, matmul_done_last, perf counters and a one-entry FIFO."""
from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np

from tensore.cosim.programs import (COLUMN_KINDS, VECTOR_KINDS, Program, _Builder, _put_mx, _reg_value, _special_matrix,
                            _t3)
from tensore.model import addrmap
from tensore.model import dtypes as dt
from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa import DESCRIPTOR_BYTES, ErrorCode, Opcode, check, error_code, opcodes_of
from tensore.model.isa.asm import assemble, disassemble
from tensore.model.isa.check import matmul_input_dtypes
from tensore.model.isa.microop import DOUBLE_ROW_FROM, group_step

FP8 = (Dtype.FP8_EXP3, Dtype.FP8_EXP4, Dtype.FP8_EXP5)
MIXABLE = FP8 + (Dtype.BFLOAT16, Dtype.FP16)              # moving and stationary formats that may differ
BLOCKS = ("dense", "dense", "dense", "tiles", "transpose", "sparse", "mx", "lut", "round", "illegal")
EXTRA_BLOCKS = ("seed", "xload", "tagw", "pattern", "groups", "transpose", "lut", "illegal_any", "dense", "mx", "round")
# the third stream (D-T95): blocks aimed at the coverage bins the first two reach rarely or never
CLOSURE_BLOCKS = ("xload_any", "lut_more", "mixed_any", "transpose", "burst", "tiles_any", "seed", "illegal_code",
                  "mx", "groups")


class _Gen:
    """One program under construction: the builder (SBUF allocation, text lines) and the random
    choices."""

    def __init__(self, gen, seed, rows, cols):
        self.b = _Builder(f"random_{Gen.parse(gen).name.lower()}_{seed}", gen, rows, cols, seed)
        self.gen, self.rows, self.cols, self.rng = self.b.gen, rows, cols, self.b.rng
        self.mav = self.gen.layout == Gen.MAVERICK
        self.events: list = []                 # events set by earlier micro-ops, not yet waited for
        self.extended = False                  # drawing the extra blocks (wider domains)
        self.closure = False                   # drawing the closure blocks (wider still, D-T95)

    # -- data ------------------------------------------------------------------------------------
    def codes(self, dtype, k, count):
        """[k, count] codes: normal values, special values or uniformly random codes."""
        dtype = Dtype.parse(dtype)
        how = self.rng.choice(["normal", "normal", "special", "random"])
        width = dt.format_of(dtype, self.gen).width
        if how == "random" or dtype not in MIXABLE + (Dtype.FP32, Dtype.FP8_EXP2):
            return self.rng.integers(0, 1 << width, (k, count), dtype=np.uint64)
        if how == "special":
            return _special_matrix(self.b, dtype, k, count, VECTOR_KINDS)
        return self.b.values(dtype, (k, count)).astype(np.uint64)

    def put(self, codes, esize):
        return self.b.put(0, codes, esize)

    # -- descriptor fragments --------------------------------------------------------------------
    def order(self):
        lo = self.rng.choice(["first_col_first", "last_col_first"])
        return (lo, f"flags=(load_order={lo}) ") if self.gen >= Gen.MARIANA else (lo, f"load_order={lo} ")

    def acc(self, first: bool):
        if self.mav:
            return f"flags=(accumulate_flag={'overwrite' if first or self.rng.random() < 0.4 else 'accumulate'})"
        group = self.rng.choice(["single", "multi_start", "multi_mid", "multi_end"])
        zero = f" zero=banks_{self.rng.choice([1, 2, 4, 8])}" if group in ("single", "multi_start") and \
            self.rng.random() < 0.5 else ""
        return f"acc={group}{zero}"

    def event_fields(self):
        """Maybe wait for an event an earlier micro-op set; maybe set one."""
        text = ""
        if self.events and self.rng.random() < 0.5:
            text += f"wait={self.events.pop(0)} "
        if self.rng.random() < 0.2:
            e = int(self.rng.integers(0, 64))
            if e not in self.events:
                self.events.append(e)
                text += f"set={e} "
        return text

    def dst(self, n, out):
        esize = 2 if out == "bf16" else 4
        bank = int(self.rng.integers(0, addrmap.PSUM_BANKS))
        off = int(self.rng.integers(0, (addrmap.PSUM_BANK_BYTES - n * esize) // esize + 1)) * esize
        return _t3(f"psum(0,{bank},{off:#x})", n)

    # -- blocks ----------------------------------------------------------------------------------
    def dense(self):
        b, rng = self.b, self.rng
        dtype = Dtype(rng.choice(sorted(matmul_input_dtypes(self.gen))))
        r, c = int(rng.integers(1, self.rows + 1)), int(rng.integers(1, self.cols + 1))
        mode = f"fp32_mode={rng.choice(['low', 'high', 'low_high'])} " if dtype == Dtype.FP32 else ""
        pack = 2 if dtype in FP8 and not self.mav and self.gen >= DOUBLE_ROW_FROM and rng.random() < 0.3 else 1
        po = "perf_opt=double_row " if pack == 2 else ""
        esize = dt.format_of(dtype, self.gen).width // 8
        step = int(rng.choice([1, 1, 2]))
        w = self.codes(dtype, r, pack * c * step)
        _, lo = self.order()
        b.line(f"ldweights in_dtype={dtype.name.lower()} {mode}{po}rows={r} cols={c} {b.tile()}{lo}{self.event_fields()}"
               f"src={_t3(f'sbuf(0,{self.put(w, esize):#x})', pack * c, step)}")
        for i in range(int(rng.integers(1, 4))):
            mv = dtype
            if dtype in MIXABLE and pack == 1 and rng.random() < 0.25:
                mv = Dtype(rng.choice([int(d) for d in MIXABLE if dt.is_in_enum(d, self.gen)]))
            n = int(rng.integers(1, 17))
            out = "bf16" if self.gen >= Gen.MARIANA and rng.random() < 0.3 else "fp32"
            a = self.codes(mv, r, pack * n)
            oa = self.put(a, dt.format_of(mv, self.gen).width // 8)
            b.line(f"matmul in_dtype={mv.name.lower()} {mode}{po}out_dtype={out} rows={r} cols={c} {b.tile()}"
                   f"{self.acc(i == 0)} {self.event_fields()}src={_t3(f'sbuf(0,{oa:#x})', pack * n)} dst={self.dst(n, out)}")

    def tiles(self):
        """A weight load into a random quarter tile, another into a second one, then a matmul in each
        (the second load waits in its tile, D-T40); CAYMAN / MARIANA row / column groups, MAVERICK
        64-row tiles."""
        b, rng = self.b, self.rng
        r, c = self.rows // 2, self.cols // 2
        if r == 0 or c == 0:
            return self.dense()
        dtype = str(rng.choice(["bf16", "fp16"]))
        matmuls = []
        for _ in range(2):
            rsel, csel = int(rng.integers(0, 2)), int(rng.integers(0, 2))
            where = (f"tile_size=(row_size_log2=r64, col_size_log2=c128) tile_sel=(row_sel={rsel}, col_sel={csel}) "
                     if self.mav else f"row_grp={2 * rsel} col_grp={2 * csel} ")
            n = int(rng.integers(1, 9))
            ow, oa = self.put(self.codes(dtype, r, c), 2), self.put(self.codes(dtype, r, n), 2)
            _, lo = self.order()
            b.line(f"ldweights in_dtype={dtype} rows={r} cols={c} {where}{lo}src={_t3(f'sbuf(0,{ow:#x})', c)}")
            matmuls.append(f"matmul in_dtype={dtype} out_dtype=fp32 rows={r} cols={c} {where}{self.acc(True)} "
                           f"src={_t3(f'sbuf(0,{oa:#x})', n)} dst={self.dst(n, 'fp32')}")
        for text in matmuls:
            b.line(text)

    def transpose(self):
        b, rng = self.b, self.rng
        r, c = int(rng.integers(1, self.rows + 1)), int(rng.integers(1, self.cols + 1))
        n = int(rng.integers(1, c + 1))
        width = int(rng.choice([8, 16, 32] if self.extended else [8, 16]))
        dtype = "fp8_e4m3" if width == 8 else "bf16"
        if self.extended:
            eights = ["fp8_e4m3", "fp8_e5m2", "fp8_e3m4"] + \
                (["fp8_exp2"] if self.closure and dt.is_in_enum(Dtype.FP8_EXP2, self.gen) else [])
            dtype = str(rng.choice({8: eights, 16: ["bf16", "fp16"], 32: ["fp32"]}[width]))
        oa = self.put(rng.integers(0, 1 << width, (r, n), dtype=np.uint64), width // 8)
        flags = "flags=(xpose_mode=enabled, accumulate_flag=overwrite)" if self.mav else \
            ("flags=(xpose_mode=enabled) acc=single" if self.gen >= Gen.MARIANA else "transpose_mode=enabled acc=single")
        out = "bf16" if self.gen >= Gen.MARIANA and width != 32 and rng.random() < 0.5 else "fp32"
        mode = "fp32_mode=high " if width == 32 else ""
        b.line(f"matmul in_dtype={dtype} {mode}out_dtype={out} rows={r} cols={c} {b.tile()}{flags} {self.event_fields()}"
               f"src={_t3(f'sbuf(0,{oa:#x})', n)} dst={self.dst(r, out)}")

    def sparse(self):
        b, rng = self.b, self.rng
        r, c = int(rng.integers(1, self.rows + 1)), int(rng.integers(1, self.cols + 1))
        fmaps, n = int(rng.integers(2, 5)), int(rng.integers(1, 9))
        dtype = rng.choice(["fp16", "bf16"])
        tags = rng.integers(0, fmaps, (r, c))
        words = np.zeros((r, (c + 3) // 4), np.uint64)
        for m in range(c):                               # 4 per u16, LSB = larger logical column
            words[:, m // 4] |= tags[:, m].astype(np.uint64) << np.uint64(4 * (3 - m % 4))
        ot = self.put(words, 2)
        ow = self.put(self.codes(dtype, r, c), 2)
        oa = self.put(self.codes(dtype, r, fmaps * n), 2)
        force = int(rng.choice([0, 4, 8, 12]))
        b.line(f"ldtags in_dtype=uint16 force_tag_bits={force} rows={r} cols={c} {b.tile()}"
               f"src={_t3(f'sbuf(0,{ot:#x})', (c + 3) // 4)}")
        b.line(f"ldweights in_dtype={dtype} rows={r} cols={c} {b.tile()}src={_t3(f'sbuf(0,{ow:#x})', c)}")
        b.line(f"matmul_sparse in_dtype={dtype} out_dtype=fp32 rows={r} cols={c} {b.tile()}{self.acc(True)} "
               f"src=(start_addr=sbuf(0,{oa:#x}), step_elem=[1,0,0,{n}], num_elem=[{n},1,1,{fmaps}]) "
               f"dst={self.dst(n, 'fp32')}")

    def mx(self):
        b, rng = self.b, self.rng
        if self.gen < Gen.MARIANA:
            return self.dense()
        perfs = ["quad_row", "oct_row"] + ([] if self.mav else ["quad_row_interleave", "oct_row_tiled"])
        if self.extended:                       # every element order
            perfs = ["quad_row", "oct_row", "quad_row_interleave", "oct_row_tiled", "quad_row_tiled", "oct_row_interleave"]
        perf = str(rng.choice(perfs))
        pack = 4 if perf.startswith("quad") else 8
        rows = [r for r in range(1, self.rows + 1) if (r * pack) % 32 == 0]
        if not rows:
            return self.dense()
        r, c = int(rng.choice(rows)), int(rng.integers(1, self.cols + 1))
        elems = [Dtype.FP8_EXP4, Dtype.FP8_EXP5, Dtype.FP4_EXP2] + ([Dtype.INT4, Dtype.FP8_EXP2] if self.mav else []) + \
            ([Dtype.FP8_EXP3] if self.extended else [])
        dtype = Dtype(rng.choice([int(d) for d in elems]))
        n = int(rng.integers(1, 9))
        k = r * pack
        if dtype == Dtype.INT4 or rng.random() < 0.3:
            w = rng.integers(0, 1 << dt.format_of(dtype, self.gen).width, (k, c), dtype=np.uint64)
            a = rng.integers(0, 1 << dt.format_of(dtype, self.gen).width, (k, n), dtype=np.uint64)
        else:
            w = _special_matrix(b, dtype, k, c, COLUMN_KINDS) if rng.random() < 0.5 else b.values(dtype, (k, c))
            a = _special_matrix(b, dtype, k, n, VECTOR_KINDS) if rng.random() < 0.5 else b.values(dtype, (k, n))
        lo_s, hi_s = (0, 256) if rng.random() < 0.3 else (118, 136)
        sw, sa = rng.integers(lo_s, hi_s, (k // 32, c)), rng.integers(lo_s, hi_s, (k // 32, n))
        owd, ows = _put_mx(b, np.asarray(w), pack, c, dtype, sw, perf)
        oad, oas = _put_mx(b, np.asarray(a), pack, n, dtype, sa, perf)
        dn = dtype.name.lower()
        _, lo = self.order()
        if self.mav:
            def pat(od, osc, count):
                return (f"mxtensor_v2(data_addr=sbuf(0,{od:#x}), scale_addr=sbuf(0,{osc:#x}), "
                        f"num_elem=[{count * pack},1], p_f_dim=0x23, scale_dtype=sfp8_e8)")
            b.line(f"ldweights in_dtype={dn} rows={r} cols={c} {b.tile()}perf_mode={perf} {lo}src={pat(owd, ows, c)}")
            b.line(f"matmul in_dtype={dn} out_dtype=fp32 rows={r} cols={c} {b.tile()}perf_mode={perf} "
                   f"{self.acc(True)} src={pat(oad, oas, n)} dst={self.dst(n, 'fp32')}")
        else:
            def pat(od, osc, count):
                return f"(data_addr=sbuf(0,{od:#x}), scale_addr=sbuf(0,{osc:#x}), step_elem=1, num_elem={count * pack})"
            b.line(f"ldweights_mx in_dtype={dn} rows={r} cols={c} perf_mode={perf} {lo}src={pat(owd, ows, c)}")
            b.line(f"matmul_mx in_dtype={dn} out_dtype=fp32 rows={r} cols={c} perf_mode={perf} {self.acc(True)} "
                   f"src={pat(oad, oas, n)} dst={self.dst(n, 'fp32')}")
        b.p.pack = max(b.p.pack, pack)

    def lut(self):
        b, rng = self.b, self.rng
        if self.gen < Gen.MARIANA:
            return self.dense()
        r, c, n = int(rng.integers(1, self.rows + 1)), int(rng.integers(1, self.cols + 1)), int(rng.integers(1, 9))
        table = self.codes("bf16", 1, 32)
        ot = self.put(table, 2)
        oi = self.put(rng.integers(0, 32, (r, c)), 1)
        b.line(f"conv_lut_load in_dtype=bf16 num_entries=32 src=(start_addr=sbuf(0,{ot:#x}), step_elem=[1], num_elem=[32])")
        b.line(f"ldweights in_dtype=uint8 rows={r} cols={c} {b.tile()}flags=(scalar_mode=lut, load_order=first_col_first) "
               f"src={_t3(f'sbuf(0,{oi:#x})', c)}")
        oa = self.put(self.codes("bf16", r, n), 2)
        b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows={r} cols={c} {b.tile()}{self.acc(True)} "
               f"src={_t3(f'sbuf(0,{oa:#x})', n)} dst={self.dst(n, 'fp32')}")
        if self.extended:                       # moving codes through the table too
            oa = self.put(rng.integers(0, 32, (r, n)), 1)
            mode = "flags=(scalar_mode=lut, accumulate_flag=overwrite)" if self.mav else \
                f"flags=(scalar_mode=lut) {self.acc(True)}"
            b.line(f"matmul in_dtype=uint8 out_dtype=fp32 rows={r} cols={c} {b.tile()}{mode} "
                   f"src={_t3(f'sbuf(0,{oa:#x})', n)} dst={self.dst(n, 'fp32')}")

    def round(self):
        o = self.put(np.array([[int(self.rng.integers(0, 2))]]), 4)
        self.b.line(f"pe_reg_write reg=psum_round value=0 {self.event_fields()}"
                    f"src=(start_addr=sbuf(0,{o:#x}), step_elem=[1], num_elem=[1])")

    def illegal(self, base=None):
        """A legal descriptor of another block (`base`, or a dense / PeRegWrite block) with one byte
        changed until `check` refuses it on the program's array, or an opcode the generation does
        not have."""
        rng = self.rng
        if rng.random() < 0.2:
            missing = [op for op in range(1, 256) if op not in {int(o) for o in opcodes_of(self.gen)}]
            data = bytearray(rng.integers(0, 256, DESCRIPTOR_BYTES, dtype=np.uint8).tobytes())
            data[0] = int(rng.choice(missing))
        else:
            saved, events = list(self.b.lines), list(self.events)
            (base or (self.dense if rng.random() < 0.7 else self.round))()
            data = bytearray(assemble(self.b.lines[-1], self.gen))
            self.b.lines, self.events = saved, events
            for _ in range(64):
                trial = bytearray(data)
                trial[int(rng.integers(1, DESCRIPTOR_BYTES))] = int(rng.integers(0, 256))
                if error_code(check(bytes(trial), self.gen, array_cols=self.b.p.cols)) != ErrorCode.NONE:
                    data = trial
                    break
            else:                                    # (header bytes 1-3 are ignored, D-20)
                data[0] = 0xFF
        self.b.line(disassemble(bytes(data), self.gen, annotate=False).strip())

    # -- extra blocks (the second random stream, D-T73) -------------------------------------------
    def illegal_any(self):
        kinds = [k for k in BLOCKS + EXTRA_BLOCKS if not k.startswith("illegal")]
        self.illegal(getattr(self, str(self.rng.choice(kinds))))

    def round_imm(self):
        """PeRegWrite of the PSUM rounding with a random immediate (used with bypass_peregwrite_instr)
        and a random SBUF value."""
        o = self.put(np.array([[int(self.rng.integers(0, 2))]]), 4)
        self.b.line(f"pe_reg_write reg=psum_round value={int(self.rng.integers(0, 2))} {self.event_fields()}"
                    f"src=(start_addr=sbuf(0,{o:#x}), step_elem=[1], num_elem=[1])")

    def seed(self):
        """Save or load SR states: MARIANA PeManageSeed (16 states of each partition), MAVERICK a
        seed_mode matmul (the two states of one bank of each partition)."""
        b, rng = self.b, self.rng
        if self.gen < Gen.MARIANA:
            return self.dense()
        mode = str(rng.choice(["save_seed", "load_seed"]))
        states = rng.integers(0, 1 << 32, (16, 128), dtype=np.uint64)
        if self.mav:            # SaveSeed only: a LoadSeed pattern holds one seed per column of the array,
            if not self.closure:  # which the size-free check refuses on a small array (the library loads
                mode = "save_seed"  # them; the closure stream too: the engine checks on the program's array)
            o = self.put(states[:1, :2 * self.cols], 4)
            bank = int(rng.integers(0, addrmap.PSUM_BANKS))
            off = 4 * int(rng.integers(0, addrmap.PSUM_BANK_CELLS - 1))
            b.line("matmul in_dtype=fp32 fp32_mode=high out_dtype=fp32 rows=1 cols=0 "
                   f"tile_size=(row_size_log2=r64, col_size_log2=c256) flags=(xpose_mode=enabled, seed_mode={mode}) "
                   f"{self.event_fields()}src=(start_addr=sbuf(0,{o:#x}), step_elem=[1,0,0], num_elem=[{2 * self.cols},1,1]) "
                   f"dst=(start_addr=psum(0,{bank},{off:#x}), step_elem=[1,0,1], num_elem=[1,1,2])")
            return
        ident = self.put(np.array([[0x3F80] * 16]), 2)                      # bf16 1.0
        idp = f"identity_dtype=bf16 identity_mem_pattern=(start_addr=sbuf(0,{ident:#x}), step_elem=[1], num_elem=[16])"
        if mode == "save_seed":
            b.line(f"pe_manage_seed mode=save_seed rows=16 cols=128 {idp} {self.event_fields()}"
                   "dst_seed_mem_pattern=(start_addr=psum(0,0,0), step_elem=[1,512], num_elem=[2,8])")
        else:
            o = self.put(states, 4)                                          # state s in partition s
            b.line(f"pe_manage_seed mode=load_seed rows=16 cols=128 {idp} {self.event_fields()}"
                   f"src_seed_mem_pattern=(start_addr=sbuf(0,{o:#x}), step_elem=[1,0], num_elem=[128,1])")

    def _matmuls(self, dtype, r, c, where="", count=None):
        """1-3 matmuls of `dtype` on the loaded r x c block."""
        b, rng = self.b, self.rng
        for i in range(count or int(rng.integers(1, 4))):
            n = int(rng.integers(1, 17))
            out = "bf16" if self.gen >= Gen.MARIANA and rng.random() < 0.3 else "fp32"
            oa = self.put(self.codes(dtype, r, n), dt.format_of(dtype, self.gen).width // 8)
            b.line(f"matmul in_dtype={Dtype.parse(dtype).name.lower()} out_dtype={out} rows={r} cols={c} "
                   f"{where or b.tile()}{self.acc(i == 0)} {self.event_fields()}"
                   f"src={_t3(f'sbuf(0,{oa:#x})', n)} dst={self.dst(n, out)}")

    def groups(self):
        """A weight load and matmuls in a random row group / column group (CAYMAN / MARIANA: each group
        a quarter of the array; the block reaches to the array's edge at most)."""
        b, rng = self.b, self.rng
        if self.mav:
            return self.tiles()
        step = group_step(self.gen)
        rg, cg = int(rng.integers(0, 4)) // step * step, int(rng.integers(0, 4)) // step * step
        r = int(rng.integers(1, self.rows - rg * self.rows // 4 + 1))
        c = int(rng.integers(1, self.cols - cg * self.cols // 4 + 1))
        dtype = str(rng.choice(["bf16", "fp16", "fp8_e4m3"]))
        ow = self.put(self.codes(dtype, r, c), dt.format_of(dtype, self.gen).width // 8)
        _, lo = self.order()
        where = f"row_grp={rg} col_grp={cg} "
        b.line(f"ldweights in_dtype={dtype} rows={r} cols={c} {where}{lo}src={_t3(f'sbuf(0,{ow:#x})', c)}")
        self._matmuls(dtype, r, c, where)

    def xload(self):
        """A transposed weight load (stationary column c from partition c, row k from element k of a
        strided pattern), then matmuls."""
        b, rng = self.b, self.rng
        r, c = int(rng.integers(1, self.rows + 1)), int(rng.integers(1, self.cols + 1))
        dtype, step = str(rng.choice(["bf16", "fp16"])), int(rng.choice([1, 2]))
        ow = self.put(self.codes(dtype, c, step * r), 2)
        lo = str(rng.choice(["first_col_first", "last_col_first"]))
        flags = f"flags=(xpose_mode=enabled, load_order={lo}) " if self.gen >= Gen.MARIANA else \
            f"transpose_mode=enabled load_order={lo} "
        b.line(f"ldweights in_dtype={dtype} rows={r} cols={c} {b.tile()}{flags}{self.event_fields()}"
               f"src={_t3(f'sbuf(0,{ow:#x})', r, step)}")
        self._matmuls(dtype, r, c)

    def tagw(self):
        """A TAG_WEIGHT load ({u16 weight, u16 tag} elements) and a MatmulSparse over 2-4 fmaps
        (CAYMAN / MARIANA)."""
        b, rng = self.b, self.rng
        if self.mav:
            return self.dense()
        r, c, n = int(rng.integers(1, self.rows + 1)), int(rng.integers(1, self.cols + 1)), int(rng.integers(1, 9))
        dtype, fmaps = str(rng.choice(["bf16", "fp16"])), int(rng.integers(2, 5))
        tags = rng.integers(0, fmaps, (r, c)).astype(np.uint64)
        ow = self.put(self.codes(dtype, r, c) | (tags << np.uint64(16)), 4)
        oa = self.put(self.codes(dtype, r, fmaps * n), 2)
        _, lo = self.order()
        b.line(f"ldweights in_dtype={dtype} tag_weight_mode=tag_weight rows={r} cols={c} {lo}{self.event_fields()}"
               f"src={_t3(f'sbuf(0,{ow:#x})', c)}")
        b.line(f"matmul_sparse in_dtype={dtype} out_dtype=fp32 rows={r} cols={c} {self.acc(True)} "
               f"src=(start_addr=sbuf(0,{oa:#x}), step_elem=[1,0,0,{n}], num_elem=[{n},1,1,{fmaps}]) "
               f"dst={self.dst(n, 'fp32')}")

    def pattern(self):
        """A weight load and a matmul whose moving vectors come along a strided 2-D pattern and land
        along a 2-D destination pattern inside one bank."""
        b, rng = self.b, self.rng
        dtype = str(rng.choice(["bf16", "fp16", "fp8_e4m3", "fp8_e5m2"]))
        esize = dt.format_of(dtype, self.gen).width // 8
        r, c = int(rng.integers(1, self.rows + 1)), int(rng.integers(1, self.cols + 1))
        ow = self.put(self.codes(dtype, r, c), esize)
        _, lo = self.order()
        b.line(f"ldweights in_dtype={dtype} rows={r} cols={c} {b.tile()}{lo}src={_t3(f'sbuf(0,{ow:#x})', c)}")
        n0, n1, s0 = int(rng.integers(1, 9)), int(rng.integers(1, 5)), int(rng.integers(1, 3))
        s1 = s0 * n0 + int(rng.integers(0, 4))
        oa = self.put(self.codes(dtype, r, (n1 - 1) * s1 + (n0 - 1) * s0 + 1), esize)
        out = "bf16" if self.gen >= Gen.MARIANA and rng.random() < 0.3 else "fp32"
        cell = 2 if out == "bf16" else 4
        d1 = n0 + int(rng.integers(0, 4))
        span = (n1 - 1) * d1 + n0
        bank = int(rng.integers(0, addrmap.PSUM_BANKS))
        off = cell * int(rng.integers(0, addrmap.PSUM_BANK_BYTES // cell - span + 1))
        b.line(f"matmul in_dtype={dtype} out_dtype={out} rows={r} cols={c} {b.tile()}{self.acc(True)} "
               f"{self.event_fields()}src=(start_addr=sbuf(0,{oa:#x}), step_elem=[{s0},{s1},0], num_elem=[{n0},{n1},1]) "
               f"dst=(start_addr=psum(0,{bank},{off:#x}), step_elem=[1,{d1},0], num_elem=[{n0},{n1},1])")


    # -- closure blocks (the third random stream, D-T95) -----------------------------------------
    def _mm_line(self, dtype, r, c, where, first, mode=""):
        n = int(self.rng.integers(1, 17))
        out = "bf16" if self.gen >= Gen.MARIANA and self.rng.random() < 0.3 else "fp32"
        oa = self.put(self.codes(dtype, r, n), max(1, dt.format_of(dtype, self.gen).width // 8))
        self.b.line(f"matmul in_dtype={Dtype.parse(dtype).name.lower()} {mode}out_dtype={out} rows={r} cols={c} "
                    f"{where or self.b.tile()}{self.acc(first)} {self.event_fields()}"
                    f"src={_t3(f'sbuf(0,{oa:#x})', n)} dst={self.dst(n, out)}")

    def xload_any(self):
        """A transposed weight load of any element dtype the ISA transposes on this generation (the
        rule of model.isa.check: a valid 8/16/32-bit or MARIANA 4-bit code), then matmuls of it where
        it is a matmul input (4-bit codes: a plain bf16 load of the same block instead)."""
        b, rng = self.b, self.rng
        dtypes = [d for d in sorted(matmul_input_dtypes(self.gen) | set(dt.dtypes_of(self.gen)))
                  if (d in matmul_input_dtypes(self.gen) or dt.is_valid_mx_dtype(d, self.gen))
                  and dt.is_valid_dtype(d, self.gen) and not dt.is_cptc(d)]
        dtype = Dtype(rng.choice([int(d) for d in dtypes]))
        r, c = int(rng.integers(1, self.rows + 1)), int(rng.integers(1, self.cols + 1))
        width = dt.format_of(dtype, self.gen).width
        esize, step = max(1, width // 8), int(rng.choice([1, 2]))
        ow = self.put(rng.integers(0, 1 << width, (c, step * r), dtype=np.uint64) if width < 8 or rng.random() < 0.3
                      else self.codes(dtype, c, step * r), esize)
        lo = str(rng.choice(["first_col_first", "last_col_first"]))
        mode = f"fp32_mode={rng.choice(['low', 'high', 'low_high'])} " if dtype == Dtype.FP32 else ""
        flags = f"flags=(xpose_mode=enabled, load_order={lo}) " if self.gen >= Gen.MARIANA else \
            f"transpose_mode=enabled load_order={lo} "
        name = dtype.name.lower()
        b.line(f"ldweights in_dtype={name} {mode}rows={r} cols={c} {b.tile()}{flags}{self.event_fields()}"
               f"src={_t3(f'sbuf(0,{ow:#x})', r, step)}")
        if dtype in matmul_input_dtypes(self.gen):
            for i in range(int(rng.integers(1, 3))):
                self._mm_line(name, r, c, "", i == 0, mode)
        else:
            ob = self.put(self.codes("bf16", r, c), 2)
            b.line(f"ldweights in_dtype=bf16 rows={r} cols={c} {b.tile()}{self.order()[1]}src={_t3(f'sbuf(0,{ob:#x})', c)}")
            self._mm_line("bf16", r, c, "", True)

    def lut_more(self):
        """ConvLutLoad of a BF16 / FP16 / FP32 table, a LUT weight load in either load order, then a
        BF16 / FP16 matmul on the table's weights or a LUT-mode MatmulSparse (UINT8 moving codes)."""
        b, rng = self.b, self.rng
        if self.gen < Gen.MARIANA:
            return self.dense()
        r, c, n = int(rng.integers(1, self.rows + 1)), int(rng.integers(1, self.cols + 1)), int(rng.integers(1, 9))
        tdt = str(rng.choice(["bf16", "fp16", "fp32"]))
        ot = self.put(self.codes(tdt, 1, 32), 4 if tdt == "fp32" else 2)
        b.line(f"conv_lut_load in_dtype={tdt} num_entries=32 src=(start_addr=sbuf(0,{ot:#x}), step_elem=[1], num_elem=[32])")
        lo = str(rng.choice(["first_col_first", "last_col_first"]))
        if rng.random() < 0.5:
            oi = self.put(rng.integers(0, 32, (r, c)), 1)
            b.line(f"ldweights in_dtype=uint8 rows={r} cols={c} {b.tile()}flags=(scalar_mode=lut, load_order={lo}) "
                   f"src={_t3(f'sbuf(0,{oi:#x})', c)}")
            self._mm_line(str(rng.choice(["bf16", "fp16"])), r, c, "", True)
            return
        fmaps, dtype = int(rng.integers(2, 5)), str(rng.choice(["fp16", "bf16"]))
        tags = rng.integers(0, fmaps, (r, c))
        words = np.zeros((r, (c + 3) // 4), np.uint64)
        for m in range(c):
            words[:, m // 4] |= tags[:, m].astype(np.uint64) << np.uint64(4 * (3 - m % 4))
        ot, ow = self.put(words, 2), self.put(self.codes(dtype, r, c), 2)
        oa = self.put(rng.integers(0, 32, (r, fmaps * n)), 1)
        b.line(f"ldtags in_dtype=uint16 force_tag_bits={int(rng.choice([0, 4, 8, 12]))} rows={r} cols={c} {b.tile()}"
               f"src={_t3(f'sbuf(0,{ot:#x})', (c + 3) // 4)}")
        b.line(f"ldweights in_dtype={dtype} rows={r} cols={c} {b.tile()}flags=(load_order={lo}) "
               f"src={_t3(f'sbuf(0,{ow:#x})', c)}")
        mode = "flags=(scalar_mode=lut, accumulate_flag=overwrite)" if self.mav else f"flags=(scalar_mode=lut) {self.acc(True)}"
        b.line(f"matmul_sparse in_dtype=uint8 out_dtype=fp32 rows={r} cols={c} {b.tile()}{mode} "
               f"src=(start_addr=sbuf(0,{oa:#x}), step_elem=[1,0,0,{n}], num_elem=[{n},1,1,{fmaps}]) "
               f"dst={self.dst(n, 'fp32')}")

    def mixed_any(self):
        """A weight load and matmuls of another mixable dtype (FP8_EXP2 too where it exists)."""
        b, rng = self.b, self.rng
        kinds = [d for d in MIXABLE + (Dtype.FP8_EXP2,) if dt.is_in_enum(d, self.gen)]
        st, mv = (Dtype(x) for x in rng.choice([int(d) for d in kinds], 2, replace=False))
        r, c = int(rng.integers(1, self.rows + 1)), int(rng.integers(1, self.cols + 1))
        ow = self.put(self.codes(st, r, c), dt.format_of(st, self.gen).width // 8)
        b.line(f"ldweights in_dtype={st.name.lower()} rows={r} cols={c} {b.tile()}{self.order()[1]}"
               f"src={_t3(f'sbuf(0,{ow:#x})', c)}")
        for i in range(int(rng.integers(1, 3))):
            self._mm_line(str(rng.choice([mv.name.lower(), st.name.lower()])), r, c, "", i == 0)

    def burst(self):
        """A run of one-vector 4-pass FP32 matmuls alternating between two disjoint blocks (no issue
        floor between them, so more than MAX_IN_FLIGHT are in flight where R + C exceeds it): the two
        column halves over every row (their sums cross every row tile, D-T100; MAVERICK's c128 tiles);
        then an FP32 load of other rows and a few matmuls (the next 4-pass matmul waits for the array's
        rhythm)."""
        rng = self.rng
        mode = f"fp32_mode={rng.choice(['high', 'low_high'])} "
        r, c = self.rows, self.cols // 2
        halves = [f"tile_size=(row_size_log2=r128, col_size_log2=c128) tile_sel=(row_sel=0, col_sel={s}) "
                  if self.mav else f"col_grp={2 * s} " for s in (0, 1)]
        for where in halves:
            self._fp32_load(mode, r, c, where)
        oa = self.put(self.codes("fp32", r, 1), 4)
        for i in range(int(rng.integers(18, 22))):
            self._fp32_vector(mode, r, c, halves[i % 2], i < 2, oa)
        rr = int(rng.integers(1, self.rows + 1))
        self._fp32_load(mode, rr, c, self.b.tile())
        oa = self.put(self.codes("fp32", rr, 1), 4)
        for i in range(int(rng.integers(1, 4))):
            self._fp32_vector(mode, rr, c, self.b.tile(), i == 0, oa)

    def _fp32_load(self, mode, rows, cols, where):
        ow = self.put(self.codes("fp32", rows, cols), 4)
        self.b.line(f"ldweights in_dtype=fp32 {mode}rows={rows} cols={cols} {where}{self.order()[1]}"
                    f"src={_t3(f'sbuf(0,{ow:#x})', cols)}")

    def _fp32_vector(self, mode, rows, cols, where, first, oa):
        """A one-vector 4-pass FP32 matmul of the moving vector at `oa`."""
        self.b.line(f"matmul in_dtype=fp32 {mode}out_dtype=fp32 rows={rows} cols={cols} {where}{self.acc(first)} "
                    f"src={_t3(f'sbuf(0,{oa:#x})', 1)} dst={self.dst(1, 'fp32')}")

    def tiles_any(self):
        """MAVERICK: a weight load and matmuls in any tile (r128 / r64 x c128 / c256, either select);
        CAYMAN / MARIANA: a row / column group."""
        b, rng = self.b, self.rng
        if not self.mav:
            return self.groups()
        tile = str(rng.choice(["r128_c128", "r128_c128_col1", "r128_c256", "r64_c128", "r64_c256"]))
        rsel = int(rng.integers(0, 2)) if tile.startswith("r64") else 0
        csel = int(tile == "r128_c128_col1" or (tile == "r64_c128" and rng.random() < 0.5))
        rs, cs = tile.split("_")[:2]
        where = f"tile_size=(row_size_log2={rs}, col_size_log2={cs}) tile_sel=(row_sel={rsel}, col_sel={csel}) "
        r = int(rng.integers(1, (self.rows // 2 if rs == "r64" else self.rows) + 1))
        c = int(rng.integers(1, self.cols + 1))
        dtype = str(rng.choice(["bf16", "fp16", "fp8_e4m3"]))
        ow = self.put(self.codes(dtype, r, c), dt.format_of(dtype, self.gen).width // 8)
        b.line(f"ldweights in_dtype={dtype} rows={r} cols={c} {where}{self.order()[1]}src={_t3(f'sbuf(0,{ow:#x})', c)}")
        self._matmuls(dtype, r, c, where)

    def illegal_code(self):
        """A descriptor refused with a code random mutations seldom give (the smallest code wins):
        fp32_mode on a BF16 matmul, a bad force_tag_bits, a LUT table of FP8, a seed micro-op of the
        wrong shape, a PE opcode the generation lacks, FP8 double-row weights under a plain matmul
        (the engine's pump rule, BAD_MX) or a MAVERICK pump without an MXTensorV2 source."""
        b, rng = self.b, self.rng
        r, c, n = int(rng.integers(1, self.rows + 1)), int(rng.integers(1, self.cols + 1)), int(rng.integers(1, 9))
        acc = "flags=(accumulate_flag=overwrite)" if self.mav else "acc=single"
        oa = self.put(self.codes("bf16", r, 2 * n), 2)
        mm = f"rows={r} cols={c} {b.tile()}{acc} src={_t3(f'sbuf(0,{oa:#x})', 2 * n)} dst={self.dst(2 * n, 'fp32')}"
        kinds = ["fp32_mode", "tags"] + (["pump"] if self.mav or self.gen >= DOUBLE_ROW_FROM else []) + \
            (["lut", "seed"] if self.gen >= Gen.MARIANA else [])
        if {int(o) for o in Opcode} - {int(o) for o in opcodes_of(self.gen)}:
            kinds.append("opcode")
        kind = str(rng.choice(kinds))
        if kind == "fp32_mode":
            b.line(f"matmul in_dtype=bf16 fp32_mode={rng.choice(['low', 'high', 'low_high'])} out_dtype=fp32 {mm}")
        elif kind == "tags":
            ot = self.put(np.zeros((r, (c + 3) // 4)), 2)
            b.line(f"ldtags in_dtype=uint16 force_tag_bits={int(rng.choice([1, 2, 3, 5, 15]))} rows={r} cols={c} "
                   f"{b.tile()}src={_t3(f'sbuf(0,{ot:#x})', (c + 3) // 4)}")
        elif kind == "lut":
            ot = self.put(self.codes("fp8_e4m3", 1, 32), 1)
            b.line(f"conv_lut_load in_dtype={rng.choice(['fp8_e4m3', 'fp8_e5m2'])} num_entries=32 "
                   f"src=(start_addr=sbuf(0,{ot:#x}), step_elem=[1], num_elem=[32])")
        elif kind == "seed" and self.mav:
            o = self.put(np.zeros((1, 2 * self.cols)), 4)
            b.line("matmul in_dtype=fp32 fp32_mode=high out_dtype=fp32 rows=2 cols=0 "
                   "tile_size=(row_size_log2=r64, col_size_log2=c256) flags=(xpose_mode=enabled, seed_mode=save_seed) "
                   f"src=(start_addr=sbuf(0,{o:#x}), step_elem=[1,0,0], num_elem=[{2 * self.cols},1,1]) "
                   "dst=(start_addr=psum(0,0,0x0), step_elem=[1,0,1], num_elem=[1,1,2])")
        elif kind == "seed":
            ident = self.put(np.array([[0x3F80] * 16]), 2)
            b.line(f"pe_manage_seed mode=save_seed rows=8 cols=128 identity_dtype=bf16 identity_mem_pattern="
                   f"(start_addr=sbuf(0,{ident:#x}), step_elem=[1], num_elem=[16]) "
                   "dst_seed_mem_pattern=(start_addr=psum(0,0,0), step_elem=[1,512], num_elem=[2,8])")
        elif kind == "opcode":
            missing = sorted({int(o) for o in Opcode} - {int(o) for o in opcodes_of(self.gen)})
            b.line(".raw 0x" + f"{int(rng.choice(missing)):02x}" + "00" * (DESCRIPTOR_BYTES - 1))
        elif self.mav:                      # a pump of a plain source
            b.line(f"matmul in_dtype=fp8_e4m3 out_dtype=fp32 perf_mode={rng.choice(['quad_row', 'oct_row'])} {mm}")
        else:                               # double-row weights, a single-row matmul: the engine's pump rule
            ow = self.put(self.codes("fp8_e4m3", r, 2 * c), 1)
            oa8 = self.put(self.codes("fp8_e4m3", r, n), 1)
            b.line(f"ldweights in_dtype=fp8_e4m3 perf_opt=double_row rows={r} cols={c} {b.tile()}"
                   f"src={_t3(f'sbuf(0,{ow:#x})', 2 * c)}")
            b.line(f"matmul in_dtype=fp8_e4m3 out_dtype=fp32 rows={r} cols={c} {b.tile()}{acc} "
                   f"src={_t3(f'sbuf(0,{oa8:#x})', n)} dst={self.dst(n, 'fp32')}")


def _first_regs(rng) -> tuple:
    """The first stream's register fields: (queue_cfg, arr_cluster_cfg)."""
    queue, cluster = {}, {}
    if rng.random() < 0.3:
        queue = dict(fifo_size_sel=int(rng.integers(0, 2)), disable_dependency_check=int(rng.random() < 0.3))
    if rng.random() < 0.3:
        cluster = dict(en_inter_instr_dly=1, inter_instr_dly_cnt=int(rng.integers(0, 8)))
    return queue, cluster


def _extra_regs(xr, queue: dict, cluster: dict) -> dict:
    """The extra stream's bypass_peregwrite_instr, matmul_done_last and perf counter draws; the
    register values."""
    regs = {}
    if xr is not None:
        if xr.random() < 0.15:
            queue["bypass_peregwrite_instr"] = 1
        if xr.random() < 0.15:
            cluster["matmul_done_last"] = 0
        if xr.random() < 0.3:
            regs["perf_cntr_cfg"] = _reg_value("perf_cntr_cfg", cntr_en=1)
    if queue:
        regs["queue_cfg"] = _reg_value("queue_cfg", **queue)
    if cluster:
        regs["arr_cluster_cfg"] = _reg_value("arr_cluster_cfg", **cluster)
    return regs


def generate(gen, seed: int, *, rows: int = 8, cols: int = 8, blocks: int = 8, extras: int | None = None,
             closure: int | None = None) -> Program:
    """A random program of `blocks` blocks for `gen` on a rows x cols array (MAVERICK: rows x 2 cols,
    working in the left half like the library), then `extras` blocks from the second stream (default
    blocks // 3; 0: none), then `closure` blocks from a third (default blocks // 4, none without extras; 0: none, D-T95),
    with the golden engine's expectations."""
    g = _Gen(gen, seed, rows, cols)
    kinds = [k for k in BLOCKS if not (k in ("mx", "lut") and g.gen < Gen.MARIANA)]
    for _ in range(blocks):
        getattr(g, str(g.rng.choice(kinds)))()
    queue, cluster = _first_regs(g.rng)
    extras = blocks // 3 if extras is None else extras
    xr = np.random.default_rng([seed, 0x7E5]) if extras else None
    if xr is not None:
        g.rng = g.b.rng = xr
        g.extended = True
        xkinds = [("round_imm" if k == "round" else k) for k in EXTRA_BLOCKS
                  if not (k in ("mx", "lut") and g.gen < Gen.MARIANA)]
        for _ in range(extras):
            getattr(g, str(xr.choice(xkinds)))()
    closure = (blocks // 4 if extras else 0) if closure is None else closure
    if closure:                                # the third stream: the first two streams' blocks stay as they were
        cr = np.random.default_rng([seed, 0xC105])
        g.rng = g.b.rng = cr
        g.extended = g.closure = True
        for _ in range(closure):
            getattr(g, str(cr.choice(CLOSURE_BLOCKS)))()
    g.b.p.regs = _extra_regs(xr, queue, cluster)
    program = g.b.done()
    try:
        return finish(program)
    except ValueError as exc:                  # a wait whose setting micro-op was refused: drop the waits
        if "stalls" not in str(exc):
            raise
        program.text = re.sub(r" wait=\d+", "", program.text)
        return finish(program)


def run_golden(program: Program, *, shared: bool = True):
    """The golden engine's run of a program: (engine, trace), shared by its callers (Program.golden)."""
    eng, trace, _ = program.golden(shared=shared)
    return eng, trace


def finish(program: Program) -> Program:
    """Fill in the golden engine's expectations: every PSUM bank of the array's partitions (as raw
    32-bit cells) and the refused descriptors.  A program whose golden run stalls is an error."""
    eng, trace = run_golden(program)
    if trace.stalled is not None:
        raise ValueError(f"{program.name}: the golden engine stalls: {trace.stalled}")
    cells = eng.psum.cells(4)
    per_bank = addrmap.PSUM_BANK_BYTES // 4
    program.expect_fp32 = {(p, bank): (0, cells[p, bank * per_bank:(bank + 1) * per_bank].copy())
                           for p in range(min(addrmap.PARTITIONS, program.cols)) for bank in range(addrmap.PSUM_BANKS)}
    program.expect_bf16 = {}
    program.refused = {o.index: o.error for o in trace.ops if o.error != ErrorCode.NONE}
    return program


# --- shrinking ---------------------------------------------------------------------------------

def ddmin(items: list, fails) -> list:
    """Zeller's delta debugging: a 1-minimal sublist of `items` (order kept) for which `fails` holds,
    given that it holds for `items`."""
    n = 2
    while len(items) >= 2:
        size = -(-len(items) // n)
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        reduced = next((c for c in chunks if fails(c)), None)
        if reduced is not None:
            items, n = reduced, 2
            continue
        if len(chunks) > 2:
            complements = ([x for j, c in enumerate(chunks) if j != i for x in c] for i in range(len(chunks)))
            reduced = next((rest for rest in complements if fails(rest)), None)
            if reduced is not None:
                items, n = reduced, max(n - 1, 2)
                continue
        if n >= len(items):
            break
        n = min(len(items), 2 * n)
    if len(items) == 1 and fails([]):
        return []
    return items


_NUMBER = re.compile(r"(?<![\w.])(-?0x[0-9a-fA-F]+|-?\d+)(?![\w.(])")


_WORD_FIELD = re.compile(r" \w+=\w+(?= |$)")


def _numbers(line: str) -> list:
    """(start, end, value) of each number in a descriptor's text (none in a `.raw` line)."""
    if line.startswith(".raw"):
        return []
    return [(m.start(1), m.end(1), int(m.group(1), 0)) for m in _NUMBER.finditer(line)]


def _replace_numbers(line: str, new) -> str:
    """`line` with each number v replaced by new(v) where that is not None."""
    for start, end, value in reversed(_numbers(line)):
        if new(value) is not None:
            line = line[:start] + str(new(value)) + line[end:]
    return line


def _smaller(value: int) -> list:
    return [v for v in dict.fromkeys([0, 1, value // 2, value - 1]) if 0 <= v < value]


def _with_lines(program: Program, lines: list, regs=None) -> Program:
    return replace(program, text="\n".join(lines) + ("\n" if lines else ""), expect_fp32={}, expect_bf16={},
                   refused={}, regs=dict(program.regs if regs is None else regs))


def shrink(program: Program, fails, *, max_tries: int = 3000) -> Program:
    """A smaller program for which `fails(program)` still holds: ddmin over the descriptors, then each
    numeric field towards 0 / 1 / half (a value everywhere at once, then each occurrence, list elements
    included), then fields dropped back to their defaults, then the register writes.  Candidates that
    do not assemble or whose golden run stalls or fails count as passing.  The result
    carries the golden engine's expectations."""
    tries = [0]

    def ok(candidate: Program) -> bool:
        tries[0] += 1
        if tries[0] > max_tries:
            return False
        try:
            assemble(candidate.text, candidate.gen)
            finish(candidate)
        except Exception:        # noqa: BLE001  (a candidate the golden engine cannot run reproduces nothing)
            return False
        return bool(fails(candidate))

    if not ok(_with_lines(program, program.text.strip().splitlines())):
        raise ValueError("the program does not fail: nothing to shrink")
    lines = ddmin(program.text.strip().splitlines(), lambda ls: ok(_with_lines(program, ls)))
    changed = True
    while changed:
        changed = False
        # a value everywhere at once (a column count shared by a load, a matmul and their patterns),
        # then each number alone
        for value in sorted({v for line in lines for _, _, v in _numbers(line)}, reverse=True):
            for smaller in _smaller(value):
                trial = [_replace_numbers(line, lambda v: smaller if v == value else None) for line in lines]
                if trial != lines and ok(_with_lines(program, trial)):
                    lines, changed = trial, True
                    break
        for i in range(len(lines)):
            for start, end, value in reversed(_numbers(lines[i])):
                for smaller in _smaller(value):
                    trial = lines[i][:start] + str(smaller) + lines[i][end:]
                    if ok(_with_lines(program, lines[:i] + [trial] + lines[i + 1:])):
                        lines = lines[:i] + [trial] + lines[i + 1:]
                        changed = True
                        break
    for i in range(len(lines)):                # fields back to their defaults: drop `key=word` pairs
        for m in reversed(list(_WORD_FIELD.finditer(lines[i]))):
            trial = lines[i][:m.start()] + lines[i][m.end():]
            if ok(_with_lines(program, lines[:i] + [trial] + lines[i + 1:])):
                lines = lines[:i] + [trial] + lines[i + 1:]
    regs = dict(program.regs)
    for name in list(regs):
        trial = {k: v for k, v in regs.items() if k != name}
        if ok(_with_lines(program, lines, trial)):
            regs = trial
    return finish(_with_lines(program, lines, regs))


# --- reproducers ---------------------------------------------------------------------------------

def save(program: Program, stem) -> tuple:
    """Write `stem.s` (header comment, the program text) and `stem.npz` (sbuf, and the program's
    generation, array size, registers, expectations and refusals)."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    meta = {"name": program.name, "gen": program.gen.name, "rows": program.rows, "cols": program.cols,
            "pack": program.pack, "regs": program.regs, "refused": {str(k): int(v) for k, v in program.refused.items()},
            "timing": program.timing}
    s_path, npz_path = stem.with_suffix(".s"), stem.with_suffix(".npz")
    s_path.write_text(f"# {program.name}: {program.gen.name} {program.rows} x {program.cols}, timing {program.timing}; "
                      f"registers {json.dumps(program.regs)}\n" + program.text)
    keys = sorted(program.expect_fp32)
    np.savez_compressed(npz_path, sbuf=program.sbuf, meta=json.dumps(meta),
                        expect_keys=np.array(keys, np.int64).reshape(-1, 2),
                        expect_offsets=np.array([program.expect_fp32[k][0] for k in keys], np.int64),
                        expect_bits=np.array([program.expect_fp32[k][1] for k in keys], np.uint32).reshape(len(keys), -1))
    return s_path, npz_path


def load(stem) -> Program:
    """The program `save` wrote."""
    stem = Path(stem)
    z = np.load(stem.with_suffix(".npz"))
    meta = json.loads(str(z["meta"]))
    text = "".join(line + "\n" for line in stem.with_suffix(".s").read_text().splitlines() if not line.startswith("#"))
    p = Program(meta["name"], Gen[meta["gen"]], meta["rows"], meta["cols"], text, z["sbuf"].copy(),
                regs=meta["regs"], pack=meta["pack"],
                refused={int(k): ErrorCode(v) for k, v in meta["refused"].items()}, timing=meta.get("timing", "contract"))   # saved before profiles: contract
    for key, off, bits in zip(z["expect_keys"], z["expect_offsets"], z["expect_bits"]):
        p.expect_fp32[(int(key[0]), int(key[1]))] = (int(off), bits.copy())
    return p
