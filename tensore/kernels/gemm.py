"""GEMM as a micro-op program: C[M, N] = A[M, K] @ B[K, N] on one engine (docs/kernels.md).

B is the stationary operand (K on the array rows, N on the columns, D-14), A^T streams (one moving
vector per row of A, D-15), so C^T accumulates in PSUM: partition n, element m (D-01, D-16).  K is
tiled to the array rows (x the elements per PE step), N to the columns, M to PSUM banks; the K
tiles of one output tile form an accumulate group (SPEC section 6).  Weights of the next K tile load
into the shadow registers while the previous matmul streams (D-14); output tiles rotate through the
PSUM banks.  The program runs unchanged on the golden engine and on the RTL (cosim.lockstep)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tensore.cosim.programs import Program
from tensore.model import addrmap
from tensore.model import dtypes as dt
from tensore.model.array import FP32_PASSES
from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa.enums import FP32Mode, MXPerfMode
from tensore.model.isa.microop import DOUBLE_ROW_FROM, PUMP_PACK, full_cols
from tensore.model.words import plural

FP8 = (Dtype.FP8_EXP2, Dtype.FP8_EXP3, Dtype.FP8_EXP4, Dtype.FP8_EXP5)
_UINT = {1: "<u1", 2: "<u2", 4: "<u4"}


@dataclass(frozen=True)
class Tile:
    """One output tile C[m0:m0+m, n0:n0+n]: PSUM partitions 0..n-1 (c256: columns n >= half in the
    next bank), elements 0..m-1 of `bank`, final values written by descriptor `last_op`."""
    m0: int
    m: int
    n0: int
    n: int
    bank: int
    banks: int          # 1, or 2 for a MAVERICK c256 tile
    last_op: int
    first_op: int
    ops: tuple = ()     # every matmul of the group, in order


@dataclass
class KernelProgram(Program):
    """A Program plus what a kernel needs to read and judge its result."""
    out_shape: tuple = (0, 0)
    out_dtype: Dtype = Dtype.FP32
    tiles: list = field(default_factory=list)
    half: int = 0                       # MAVERICK: columns per c128 half (c256 tiles split there)
    macs: int = 0                       # M * N * K
    passes: int = 1                     # array cycles per moving vector (D-12)
    pe_pack: int = 1                    # contraction elements per PE step (double row: 2)
    a_codes: np.ndarray | None = None   # [M, K] moving operand codes, in `dtype`
    b_codes: np.ndarray | None = None   # [K, N] stationary operand codes
    dtype: Dtype = Dtype.BFLOAT16
    fp32_mode: FP32Mode = FP32Mode.NONE
    rounding: str = "rne"               # bf16 PSUM rounding (D-18)
    k_slices: list = field(default_factory=list)   # contraction ranges of one group's matmuls, in order
    mx: str | None = None               # MX perf mode (QUAD_ROW / OCT_ROW), scales below (D-21)
    a_scales: np.ndarray | None = None  # [K / 32, M] E8M0 codes of A's blocks
    b_scales: np.ndarray | None = None  # [K / 32, N]
    sparse_w: np.ndarray | None = None  # 2:4: kept weights [K / 2, N] (b_codes: the pruned dense B)
    sparse_tags: np.ndarray | None = None   # 2:4: their index in each group of 4 [K / 2, N]
    operands: str = ""                  # where the operands came from, when not random (tensore gemm, D-T88)
    golden_trace = "aggregate"          # long kernels: PSUM writes as arrays (D-T77)

    def read(self, trace, rtl_writes=None) -> np.ndarray:
        """C [M, N] float32 from the trace: each tile's writes by its final matmul (the values a
        drain of the bank would read once its group is complete; banks may be reused later).
        `rtl_writes` [n, 4] (cycle, partition, offset, bits: tensore/outputs.py's rows of the RTL):
        C from those instead, each cell the RTL's write to it in the cycle the golden run's final
        matmul writes it, NaN where the RTL wrote none then (D-T89)."""
        es = 2 if self.out_dtype == Dtype.BFLOAT16 else 4
        last = {t.last_op: t for t in self.tiles}
        out = np.full(self.out_shape, np.nan, np.float32)
        for op, (cycle, part, off, bits) in trace.psum_writes_of(last).items():
            t, bits = last[op], bits.astype(np.uint32)
            bank = off // addrmap.PSUM_BANK_BYTES
            m = t.m0 + (off % addrmap.PSUM_BANK_BYTES) // es
            n = t.n0 + part + (bank - t.bank) * self.half
            if rtl_writes is not None:
                bits, found = _written(rtl_writes, cycle, part, off)
                m, n, bits = m[found], n[found], bits[found]
            out[m, n] = (bits << 16).view(np.float32) if es == 2 else bits.view(np.float32)
        return out


def _written(rows, cycle, part, off) -> tuple:
    """(bits uint32, found) of the writes in `rows` [n, 4] (cycle, partition, offset, bits) at each
    (cycle, part, off)."""
    def key(c, p, o):
        return (np.asarray(c, np.int64) * addrmap.PARTITIONS + np.asarray(p, np.int64)) * (1 << 20) + \
            np.asarray(o, np.int64)
    rows = np.asarray(rows, np.int64).reshape(-1, 4)
    have = key(rows[:, 0], rows[:, 1], rows[:, 2])
    order = np.argsort(have, kind="stable")
    have = have[order]
    want = key(cycle, part, off)
    i = np.clip(np.searchsorted(have, want), 0, max(len(have) - 1, 0))
    found = (have[i] == want) if len(have) else np.zeros(want.shape, bool)
    bits = rows[order][i, 3].astype(np.uint32) if len(have) else np.zeros(want.shape, np.uint32)
    return bits, found


@dataclass(frozen=True)
class Geometry:
    """The engine and the tile sizes a kernel uses."""
    gen: Gen
    rows: int                           # array rows R
    cols: int                           # array columns C (MAVERICK: both halves)
    pack: int                           # contraction elements per PE step
    out_bytes: int                      # PSUM cell size

    @property
    def k_tile(self) -> int:
        return self.rows * self.pack

    @property
    def m_tile(self) -> int:
        return addrmap.PSUM_BANK_BYTES // self.out_bytes

    @property
    def half(self) -> int:
        return self.cols // 2 if self.gen.layout == Gen.MAVERICK else self.cols

    def n_tiles(self, n: int) -> list:
        """(n0, width, c256): full-width c256 tiles on MAVERICK, else tiles of one half."""
        out, n0 = [], 0
        while n0 < n:
            if self.gen.layout == Gen.MAVERICK and n - n0 >= self.cols:
                out.append((n0, self.cols, True))
            else:
                out.append((n0, min(self.half, n - n0), False))
            n0 += out[-1][1]
        return out


MX_PACK = {"quad_row": PUMP_PACK[MXPerfMode.QUAD_ROW], "oct_row": PUMP_PACK[MXPerfMode.OCT_ROW]}


def geometry(gen, rows=None, cols=None, *, dtype="bf16", out_dtype="fp32", double_row=False, mx=None) -> Geometry:
    gen = Gen.parse(gen)
    full = full_cols(gen)
    rows, cols = rows or 128, cols or full
    if not (4 <= rows <= 128 and rows % 4 == 0):
        raise ValueError(f"--rows {rows}: a multiple of 4 from 4 to 128")
    step = 8 if gen.layout == Gen.MAVERICK else 4
    if not (4 <= cols <= full and cols % step == 0):
        raise ValueError(f"--cols {cols}: a multiple of {step} from {step} to {full} on {gen.name}")
    out = Dtype.parse(out_dtype)
    if out not in (Dtype.FP32, Dtype.BFLOAT16) or (out == Dtype.BFLOAT16 and gen < Gen.MARIANA):
        raise ValueError(f"out dtype {out.name}: FP32, or BFLOAT16 from MARIANA on (D-18)")
    if double_row and (gen.layout == Gen.MAVERICK or gen < DOUBLE_ROW_FROM or Dtype.parse(dtype) not in FP8):
        raise ValueError("double row needs FP8 inputs on CAYMAN / MARIANA (D-11, D-T14, D-T97)")
    pack = 2 if double_row else 1
    if mx is not None:
        if mx not in MX_PACK or gen.layout != Gen.MARIANA or Dtype.parse(dtype) not in FP8[1:] or double_row:
            raise ValueError(f"MX kernels: quad_row or oct_row with FP8 E3M4 / E4M3 / E5M2 elements on MARIANA "
                             f"(LdweightsMX / MatmulMX); got {mx} {Dtype.parse(dtype).name} on {gen.name}")
        pack = MX_PACK[mx]
        if rows * pack % 32:
            raise ValueError(f"MX {mx}: the array rows must hold whole 32-element blocks ({32 // pack} rows)")
    return Geometry(gen, rows, cols, pack, 4 if out == Dtype.FP32 else 2)


def quantise(x, dtype, gen) -> np.ndarray:
    """Codes of float data in `dtype` (RNE, D-07); FP32 data as its bit patterns."""
    x = np.asarray(x, np.float32)
    if Dtype.parse(dtype) == Dtype.FP32:
        return x.view(np.uint32).copy()
    return dt.from_fp32(x, dtype, gen)


def values(codes, dtype, gen) -> np.ndarray:
    """float64 values of codes (the quantised operands)."""
    return dt.to_fp32(np.asarray(codes), Dtype.parse(dtype), Gen.parse(gen)).astype(np.float64)


def _tile_bytes(codes_kn: np.ndarray, g: Geometry, es: int) -> np.ndarray:
    """[K, X] codes -> [k tiles, R, X * pack * es] bytes: partition r holds element (x, j) of
    contraction index pack * r + j at (x * pack + j) * es (D-T25 double row order)."""
    k, x = codes_kn.shape
    t = -(-k // g.k_tile)
    pad = np.zeros((t * g.k_tile, x), codes_kn.dtype)
    pad[:k] = codes_kn
    grid = pad.reshape(t, g.rows, g.pack, x).transpose(0, 1, 3, 2).reshape(t, g.rows, x * g.pack)
    return np.ascontiguousarray(grid.astype(_UINT[es])).view(np.uint8)


class _Text:
    """Assembly lines of one generation's Ldweights / Matmul forms (docs/isa.md)."""

    def __init__(self, g: Geometry, dtype: Dtype, fp32_mode, out: Dtype, mx=None):
        self.g, self.mav, self.mx = g, g.gen.layout == Gen.MAVERICK, mx
        mode = f" fp32_mode={fp32_mode.name.lower()}" if dtype == Dtype.FP32 else ""
        perf = " perf_opt=double_row" if g.pack == 2 else f" perf_mode={mx}" if mx else ""
        self.ops = f"in_dtype={dtype.name.lower()}{mode}{perf}"
        self.out = out.name.lower()
        self.lines: list[str] = []

    def _block(self, k_rows, n, c256):
        if not self.mav:
            return f"rows={k_rows} cols={n}"
        cs = "c256" if c256 else "c128"
        return f"rows={k_rows} cols={0 if c256 else n} tile_size=(row_size_log2=r128, col_size_log2={cs})"

    def _src(self, offset, count, scale):
        if scale is not None:               # MXMEM_PATTERN1D (D-T18)
            return (f"(data_addr=sbuf(0,{offset:#x}), scale_addr=sbuf(0,{scale:#x}), step_elem=1, "
                    f"num_elem={count})")
        return f"(start_addr=sbuf(0,{offset:#x}), step_elem=[1,0,0], num_elem=[{count},1,1])"

    def ldweights(self, k_rows, n, c256, offset, count, scale=None):
        lo = "load_order=first_col_first" if self.g.gen < Gen.MARIANA else "flags=(load_order=first_col_first)"
        op = "ldweights_mx" if scale is not None else "ldweights"
        self.lines.append(f"{op} {self.ops} {self._block(k_rows, n, c256)} {lo} src={self._src(offset, count, scale)}")

    def matmul(self, k_rows, n, c256, offset, count, bank, first, last, src=None, scale=None):
        if self.mav:
            acc = f"flags=(accumulate_flag={'overwrite' if first else 'accumulate'})"
        else:
            acc = "acc=" + {(1, 1): "single", (1, 0): "multi_start", (0, 0): "multi_mid", (0, 1): "multi_end"}[
                (int(first), int(last))]
        m = count // self.g.pack
        dst = (f"(start_addr=psum(0,{bank},0), step_elem=[1,0,{self.g.m_tile}], num_elem=[{m},1,2])" if c256
               else f"(start_addr=psum(0,{bank},0), step_elem=[1,0,0], num_elem=[{m},1,1])")
        src = src or self._src(offset, count, scale)
        op = "matmul_mx" if scale is not None else "matmul"
        self.lines.append(f"{op} {self.ops} out_dtype={self.out} {self._block(k_rows, n, c256)} {acc} "
                          f"src={src} dst={dst}")
        return len(self.lines) - 1


def sr_setup(sbuf, txt: _Text):
    """PSUM_ROUND = SR (D-T17, D-18): a PeRegWrite of the word 1 at sbuf(0, 0) (a barrier, first)."""
    sbuf[0, 0:4] = (1, 0, 0, 0)
    txt.lines.append("pe_reg_write reg=psum_round value=1 "
                     "src=(start_addr=sbuf(0,0x0), step_elem=[1], num_elem=[1])")


def _fp32_mode(dtype: Dtype, fp32_mode):
    if dtype != Dtype.FP32:
        if fp32_mode not in (None, "none", FP32Mode.NONE):
            raise ValueError("--fp32-mode applies to fp32 input only")
        return FP32Mode.NONE
    if fp32_mode in (None, "none", FP32Mode.NONE):
        raise ValueError("fp32 input needs --fp32-mode low, high or low_high (D-12)")
    return FP32Mode[fp32_mode.upper()] if isinstance(fp32_mode, str) else FP32Mode(fp32_mode)


def _check_dtype(dtype: Dtype, gen: Gen):
    from tensore.model.isa.check import matmul_input_dtypes
    if dtype not in matmul_input_dtypes(gen):
        names = ", ".join(sorted(d.name.lower() for d in matmul_input_dtypes(gen)))
        raise ValueError(f"dtype {dtype.name.lower()} is not a matmul input on {gen.name} ({names})")


def gemm(A, B, *, dtype="bf16", out_dtype="fp32", gen="maverick", rows=None, cols=None, fp32_mode=None,
         double_row=False, rounding="rne", psum_banks=4, mx=None, sparse=False, name="gemm") -> KernelProgram:
    """C = A @ B for float A [M, K], B [K, N] of any sizes, quantised to `dtype` (RNE, D-07).

    out_dtype FP32, or BFLOAT16 (MARIANA+) with `rounding` "rne" or "sr" (D-18, D-08);
    fp32_mode LOW / HIGH / LOW_HIGH for FP32 (D-12); double_row for FP8 (D-11);
    psum_banks: banks one chunk of output tiles accumulates in (the rest drain, D-T50);
    mx: "quad_row" / "oct_row": MX blocks of 32 along K with E8M0 scales (OCP rules, MARIANA);
    sparse: prune B to 2:4 along K and run MatmulSparse (tensore/kernels/sparse.py)."""
    gen, dtype = Gen.parse(gen), Dtype.parse(dtype)
    A, B = np.asarray(A), np.asarray(B)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0] or 0 in A.shape + B.shape:
        raise ValueError(f"A [M, K] and B [K, N] must share K and be non-empty; got {A.shape} and {B.shape}")
    kw = dict(dtype=dtype, out_dtype=out_dtype, gen=gen, rows=rows, cols=cols, fp32_mode=fp32_mode,
              double_row=double_row, rounding=rounding, psum_banks=psum_banks, name=name)
    if mx is None:
        _check_dtype(dtype, gen)
    check_size(A.shape[0], A.shape[1], B.shape[1], dtype=dtype, out_dtype=out_dtype, gen=gen, rows=rows,
               cols=cols, double_row=double_row, mx=mx, sparse=sparse)
    if mx is not None:
        from tensore.kernels import mx as mxq
        geometry(gen, rows, cols, dtype=dtype, out_dtype=out_dtype, mx=mx)
        (ac, asc), (bc, bsc) = mxq.quantise(A, dtype, gen, axis=1), mxq.quantise(B, dtype, gen, axis=0)
        prog = gemm_codes(ac, bc, mx=mx, a_scales=asc, b_scales=bsc, **kw)
        prog.macs = A.shape[0] * A.shape[1] * B.shape[1]          # K before padding to whole blocks
        prog.note = f"{A.shape[0]}x{A.shape[1]}x{B.shape[1]} MX {mx} " + prog.note.split(" ", 1)[1]
        return prog
    if sparse:
        return sparse_gemm(quantise(A, dtype, gen), quantise(B, dtype, gen), **kw)
    return gemm_codes(quantise(A, dtype, gen), quantise(B, dtype, gen), **kw)


def gemm_codes(a_codes, b_codes, *, dtype, out_dtype="fp32", gen="maverick", rows=None, cols=None,
               fp32_mode=None, double_row=False, rounding="rne", psum_banks=4, mx=None, a_scales=None,
               b_scales=None, name="gemm") -> KernelProgram:
    """gemm() on codes already in `dtype`: a_codes [M, K], b_codes [K, N] (MX: K a multiple of 32,
    a_scales [K / 32, M], b_scales [K / 32, N])."""
    gen, dtype, out = Gen.parse(gen), Dtype.parse(dtype), Dtype.parse(out_dtype)
    if mx is None:
        _check_dtype(dtype, gen)
    mode = _fp32_mode(dtype, fp32_mode)
    g = geometry(gen, rows, cols, dtype=dtype, out_dtype=out, double_row=double_row, mx=mx)
    if rounding not in ("rne", "sr") or (rounding == "sr" and out != Dtype.BFLOAT16):
        raise ValueError(f"rounding {rounding!r}: rne, or sr with a bf16 output (D-18)")
    if not 1 <= psum_banks <= addrmap.PSUM_BANKS:
        raise ValueError(f"psum_banks {psum_banks}: 1..{addrmap.PSUM_BANKS}")
    (m, k), n = a_codes.shape, b_codes.shape[1]
    es = dt.format_of(dtype, gen).width // 8
    bt, at = _tile_bytes(b_codes, g, es), _tile_bytes(np.asarray(a_codes).T, g, es)
    blocks = [bt, at] + ([_scale_bytes(b_scales, g), _scale_bytes(a_scales, g)] if mx else [])
    sbuf, offs = _sbuf_image(blocks, gen)
    b_off = offs[0]
    txt = _Text(g, dtype, mode, out, mx)
    if rounding == "sr":
        sr_setup(sbuf, txt)
    tiles = _schedule(txt, g, m, k, n, es, offs, psum_banks)
    prog = KernelProgram(name, gen, g.rows, g.cols, "\n".join(txt.lines) + "\n", sbuf,
                         pack=g.pack if g.pack > 1 else 0, out_shape=(m, n), out_dtype=out, tiles=tiles,
                         half=g.half, macs=m * n * k, passes=FP32_PASSES[mode], pe_pack=g.pack,
                         a_codes=np.asarray(a_codes), b_codes=np.asarray(b_codes), dtype=dtype, fp32_mode=mode,
                         rounding=rounding, k_slices=[(t * g.k_tile, min(k, (t + 1) * g.k_tile))
                                                      for t in _k_order(len(b_off), k, g.k_tile)],
                         mx=mx, a_scales=a_scales, b_scales=b_scales)
    prog.note = f"{m}x{k}x{n} {dtype.name.lower()} -> {out.name.lower()}, {plural(len(txt.lines), 'micro-op')}"
    return prog


def _scale_bytes(scales, g: Geometry) -> np.ndarray:
    """[K / 32, X] E8M0 codes -> [k tiles, R, X] bytes: block b's codes in its first partition (D-T25)."""
    per_tile, rows_per_block = g.k_tile // 32, 32 // g.pack
    t = -(-scales.shape[0] // per_tile)
    out = np.zeros((t, g.rows, scales.shape[1]), np.uint8)
    for b in range(scales.shape[0]):
        out[b // per_tile, (b % per_tile) * rows_per_block] = scales[b]
    return out


def _sbuf_layout(shapes: list, gen) -> tuple:
    """(offsets per block per tile, bytes used) of blocks of (tiles, bytes per tile) laid out one
    after another in every partition (64-byte aligned, after a 64-byte word area); refuses a layout
    bigger than an SBUF partition of `gen` (D-T97)."""
    offsets, at = [], 0x40
    for tiles, nbytes in shapes:
        width = (nbytes + 0x3F) & ~0x3F
        offsets.append([at + t * width for t in range(tiles)])
        at += tiles * width
    if at > addrmap.sbuf_bytes(gen):
        raise ValueError(f"the operands need {at:,} bytes per SBUF partition, more than its "
                         f"{addrmap.sbuf_bytes(gen):,} on {Gen.parse(gen).name}: split the problem")
    return offsets, at


def check_size(m: int, k: int, n: int, *, dtype="bf16", out_dtype="fp32", gen="maverick", rows=None, cols=None,
               double_row=False, mx=None, sparse=False) -> int:
    """The bytes per SBUF partition of a GEMM M x K x N's operands, from the sizes alone (the layout
    gemm_codes / sparse_gemm make, D-T50): a ValueError when they do not fit, before any operand exists."""
    gen, dtype = Gen.parse(gen), Dtype.parse(dtype)
    g = geometry(gen, rows, cols, dtype=dtype, out_dtype=out_dtype, double_row=double_row and not sparse,
                 mx=None if sparse else mx)
    es = max(1, dt.format_of(dtype, gen).width // 8)
    if sparse:
        from tensore.kernels import sparse as sp
        kp = -(-k // sp.GROUP) * sp.GROUP
        t = -(-(kp // 2) // g.rows)
        tags = 2 * (-(-n // 4) + -(-n // g.half))
        return _sbuf_layout([(t, n * es), (t, 4 * m * es), (t, tags)], gen)[1]
    if mx is not None:
        k = -(-k // 32) * 32                                       # K padded to whole blocks
    t = -(-k // g.k_tile)
    shapes = [(t, n * g.pack * es), (t, m * g.pack * es)] + ([(t, n), (t, m)] if mx else [])
    return _sbuf_layout(shapes, gen)[1]


def _sbuf_image(blocks: list, gen) -> tuple:
    """Lay [tiles, R, bytes] blocks out by _sbuf_layout; returns (sbuf [128, bytes] uint8, offsets
    per block per tile)."""
    offsets, at = _sbuf_layout([(blk.shape[0], blk.shape[2]) for blk in blocks], gen)
    sbuf = np.zeros((addrmap.PARTITIONS, (at + 0xFF) & ~0xFF), np.uint8)
    for blk, offs in zip(blocks, offsets):
        for t, off in enumerate(offs):
            sbuf[:blk.shape[1], off:off + blk.shape[2]] = blk[t]
    return sbuf, offsets


def _schedule(txt: _Text, g: Geometry, m, k, n, es, offs, psum_banks) -> list:
    """Descriptors: per N tile, per chunk of M tiles that fits `psum_banks` banks, per K tile one
    Ldweights (shadow, overlapping the previous matmul) and one matmul per M tile (D-T50).
    offs: per-K-tile offsets of B, A (and of their MX scales)."""
    b_off, a_off = offs[0], offs[1]
    b_sc, a_sc = (offs[2], offs[3]) if len(offs) > 2 else (None, None)
    t_count = len(b_off)
    m_tiles = [(m0, min(g.m_tile, m - m0)) for m0 in range(0, m, g.m_tile)]
    tiles, bank = [], 0
    for n0, nw, c256 in g.n_tiles(n):
        nb = 2 if c256 else 1
        if psum_banks < nb:
            raise ValueError("a c256 tile needs psum_banks >= 2")
        per_chunk = psum_banks // nb
        for c in range(0, len(m_tiles), per_chunk):
            chunk, banks = m_tiles[c:c + per_chunk], []
            for _ in chunk:
                bank += bank % nb                       # c256 tiles take an even bank and the next
                banks.append(bank % addrmap.PSUM_BANKS)
                bank = (bank + nb) % addrmap.PSUM_BANKS
            ops = {}
            for j, t in enumerate(_k_order(t_count, k, g.k_tile)):
                k_rows = min(g.rows, -(-(k - t * g.k_tile) // g.pack))
                txt.ldweights(k_rows, nw, c256, b_off[t] + n0 * g.pack * es, nw * g.pack,
                              None if b_sc is None else b_sc[t] + n0)
                for (m0, mw), b in zip(chunk, banks):
                    i = txt.matmul(k_rows, nw, c256, a_off[t] + m0 * g.pack * es, mw * g.pack, b,
                                   j == 0, j == t_count - 1, scale=None if a_sc is None else a_sc[t] + m0)
                    ops.setdefault(m0, []).append(i)
                    if j == t_count - 1:
                        tiles.append(Tile(m0, mw, n0, nw, b, nb, i, ops[m0][0], tuple(ops[m0])))
    return tiles


def _k_order(t_count: int, k: int, k_tile: int) -> list:
    """The K tiles in issue order: a partial last tile first. Its matmul spans fewer row tiles, so its
    sums leave at a higher tap (D-T100); issued after a full tile into the same PSUM cells it would
    wait for that tile's last write (the write order rule), issued first it waits for nothing."""
    tail = [t_count - 1] if t_count > 1 and k % k_tile else []
    return tail + [t for t in range(t_count) if t not in tail]


def run(prog: KernelProgram, *, record_pe=False, trace="detailed"):
    """Run on the golden engine: (C [M, N] float32, trace, engine); trace="aggregate" records the
    PSUM writes as arrays (model/trace.py), what a large GEMM needs."""
    from tensore.model.engine import Engine
    from tensore.model.isa.asm import assemble
    eng = Engine(prog.gen, rows=prog.rows, cols=prog.cols, sbuf=prog.sbuf_model(), record_pe=record_pe, trace=trace,
                 timing=prog.timing)
    for reg, value in prog.regs.items():
        eng.write_reg(reg, value)
    tr = eng.run(assemble(prog.text, prog.gen))
    if tr.stalled or any(o.error for o in tr.ops):
        raise RuntimeError(f"kernel program failed on the golden engine:\n{tr.summary()}")
    return prog.read(tr), tr, eng


def sparse_gemm(a_codes, b_codes, *, dtype, out_dtype="fp32", gen="maverick", rows=None, cols=None,
                fp32_mode=None, double_row=False, rounding="rne", psum_banks=4, name="gemm_2of4") -> KernelProgram:
    """C = A @ prune_2:4(B) with MatmulSparse: per K tile (2R contraction indices) a LdTags, a
    Ldweights of the kept weights and one MatmulSparse per M tile with 4 fmaps per partition."""
    from tensore.kernels import sparse as sp
    gen, dtype, out = Gen.parse(gen), Dtype.parse(dtype), Dtype.parse(out_dtype)
    if dtype == Dtype.FP32 or double_row:
        raise ValueError("2:4 sparse kernels take bf16, fp16 or fp8 inputs (MatmulSparse)")
    mode = _fp32_mode(dtype, fp32_mode)
    g = geometry(gen, rows, cols, dtype=dtype, out_dtype=out)
    (m, k), n = a_codes.shape, b_codes.shape[1]
    kp = -(-k // sp.GROUP) * sp.GROUP
    a_pad, b_pad = np.zeros((m, kp), a_codes.dtype), np.zeros((kp, n), b_codes.dtype)
    a_pad[:, :k], b_pad[:k] = a_codes, b_codes
    keep = sp.prune(dt.to_fp32(b_pad, dtype, gen))
    b_pruned = np.where(keep, b_pad, 0).astype(b_pad.dtype)
    wc, tags = sp.compress(b_pruned, keep)
    es = dt.format_of(dtype, gen).width // 8
    half = Geometry(g.gen, g.rows, g.cols, 1, g.out_bytes)             # compressed rows: one per PE row
    mv = sp.moving_fmaps(a_pad.T)                                       # [K / 2, 4, M]
    blocks = [_tile_bytes(wc, half, es), _tile_bytes(mv.reshape(kp // 2, 4 * m), half, es)]
    t_count = blocks[0].shape[0]
    tag_bytes = 2 * (-(-n // 4) + -(-n // g.half))                     # u16 words of every N tile
    sbuf, offs = _sbuf_image(blocks + [np.zeros((t_count, g.rows, tag_bytes), np.uint8)], gen)
    txt = _Text(g, dtype, mode, out)
    if rounding == "sr":
        sr_setup(sbuf, txt)
    tiles = _sparse_schedule(txt, g, sbuf, offs, wc.shape[0], m, n, es, tags, psum_banks)
    prog = KernelProgram(name, gen, g.rows, g.cols, "\n".join(txt.lines) + "\n", sbuf, out_shape=(m, n),
                         out_dtype=out, tiles=tiles, half=g.half, macs=m * n * k // 2, passes=1, pe_pack=1,
                         a_codes=a_pad, b_codes=b_pruned, dtype=dtype, fp32_mode=mode, rounding=rounding,
                         k_slices=[(2 * t * g.rows, min(kp, 2 * (t + 1) * g.rows)) for t in range(t_count)],
                         sparse_w=wc, sparse_tags=tags)
    prog.note = f"{m}x{k}x{n} 2:4 sparse {dtype.name.lower()} -> {out.name.lower()}, {plural(len(txt.lines), 'micro-op')}"
    return prog


def _sparse_schedule(txt: _Text, g: Geometry, sbuf, offs, k_rows_total, m, n, es, tags, psum_banks) -> list:
    """Per N tile (one half on MAVERICK: no c256), chunk of M tiles, K tile: LdTags (its words written
    into the tag area here), Ldweights, one MatmulSparse per M tile."""
    from tensore.kernels import sparse as sp
    w_off, a_off, tag_off = offs
    tile = "tile_size=(row_size_log2=r128, col_size_log2=c128) " if txt.mav else ""
    m_tiles = [(m0, min(g.m_tile, m - m0)) for m0 in range(0, m, g.m_tile)]
    tiles, bank, tag_col = [], 0, 0
    for n0 in range(0, n, g.half):
        nw = min(g.half, n - n0)
        n_words = -(-nw // 4)
        for c in range(0, len(m_tiles), psum_banks):
            chunk = m_tiles[c:c + psum_banks]
            banks = [(bank + i) % addrmap.PSUM_BANKS for i in range(len(chunk))]
            bank = (bank + len(chunk)) % addrmap.PSUM_BANKS
            ops = {}
            for t in range(len(w_off)):
                k_rows = min(g.rows, k_rows_total - t * g.rows)
                words = sp.tag_words(tags[t * g.rows:t * g.rows + k_rows, n0:n0 + nw])
                at = tag_off[t] + tag_col
                sbuf[:k_rows, at:at + 2 * n_words] = words.astype("<u2").view(np.uint8)
                txt.lines.append(f"ldtags in_dtype=uint16 force_tag_bits=0 rows={k_rows} cols={nw} {tile}src="
                                 f"(start_addr=sbuf(0,{at:#x}), step_elem=[1,0,0], num_elem=[{n_words},1,1])")
                txt.ldweights(k_rows, nw, False, w_off[t] + n0 * es, nw)
                for (m0, mw), b in zip(chunk, banks):
                    src = (f"(start_addr=sbuf(0,{a_off[t] + m0 * es:#x}), step_elem=[1,0,0,{m}], "
                           f"num_elem=[{mw},1,1,4])")
                    i = txt.matmul(k_rows, nw, False, 0, mw, b, t == 0, t == len(w_off) - 1, src=src)
                    txt.lines[i] = "matmul_sparse" + txt.lines[i][len("matmul"):]
                    ops.setdefault(m0, []).append(i)
                    if t == len(w_off) - 1:
                        tiles.append(Tile(m0, mw, n0, nw, b, 1, i, ops[m0][0], tuple(ops[m0])))
        tag_col += 2 * n_words
    return tiles
