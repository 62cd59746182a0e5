"""The test library of micro-op programs: each builds SBUF contents, the assembly text and the PSUM
values it must produce, computed without the engine and without its arithmetic: the column sums and
PSUM accumulates by cosim/oracle.py (exact integer arithmetic, no code shared with model/array.py or
model/mac.py), bf16 rounding by ml_dtypes and explicit xorshift arithmetic.  Used by the tests,
`tensore run`, the co-simulation and `make demo`."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from tensore.cosim.oracle import add_f32, decode, matmul
from tensore.model import addrmap
from tensore.model import dtypes as dt
from tensore.model.arr_seq_regs import REGISTERS
from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa import ErrorCode
from tensore.model.isa.microop import DOUBLE_ROW_FROM
from tensore.model.psum import SR_STATE_BASE
from tensore.model.timing import DEFAULT_PROFILE

SBUF_BYTES = 0x4000          # bytes per partition the library uses (the model is not limited to it)


@dataclass
class Program:
    name: str
    gen: Gen
    rows: int
    cols: int
    text: str
    sbuf: np.ndarray
    expect_fp32: dict = field(default_factory=dict)    # (partition, bank) -> (cells from 0, float32 bits)
    expect_bf16: dict = field(default_factory=dict)    # (partition, bank) -> (uint16 codes)
    refused: dict = field(default_factory=dict)        # descriptor index -> ErrorCode
    regs: dict = field(default_factory=dict)           # host register writes before the run
    pack: int = 0                                      # elements per PE the RTL engine needs (0: gen default)
    note: str = ""
    timing: str = DEFAULT_PROFILE                      # the engine's profile of issue rules (D-T98)
    golden_trace = "detailed"       # the golden run's trace (model/trace.py); kernels: "aggregate"

    def sbuf_model(self):
        from tensore.model.sbuf import Sbuf
        return Sbuf(self.sbuf.copy())

    def golden(self, sbuf_latency: int = 2, *, shared: bool = True) -> tuple:
        """The golden engine's run of the program: (engine, trace, machine code).  Kept until the
        text, registers, array or SBUF image change, so the checks of one program (its expectations,
        the regression's golden checks and coverage, the lockstep) share one run; callers read it.
        `shared=False`: a run of its own (e.g. of a model patched for a test)."""
        import hashlib
        import json
        from tensore.model.engine import Engine
        from tensore.model.isa.asm import assemble
        key = (self.text, json.dumps(self.regs, sort_keys=True), self.gen, self.rows, self.cols, sbuf_latency,
               self.timing, hashlib.blake2b(np.ascontiguousarray(self.sbuf).tobytes(), digest_size=16).digest())
        memo = self.__dict__.get("_golden") if shared else None
        if memo is not None and memo[0] == key:
            return memo[1]
        eng = Engine(self.gen, rows=self.rows, cols=self.cols, sbuf=self.sbuf_model(), sbuf_latency=sbuf_latency,
                     trace=self.golden_trace, timing=self.timing)
        for reg, value in self.regs.items():
            eng.write_reg(reg, value)
        code = assemble(self.text, self.gen)
        run = (eng, eng.run(code), code)
        if shared:
            self.__dict__["_golden"] = (key, run)
        return run

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_golden"}


class _Builder:
    def __init__(self, name, gen, rows, cols, seed):
        self.gen, self.rows, self.cols = Gen.parse(gen), rows, cols
        # a MAVERICK array is two c128 halves wide; the library works in the left half (c128 tile)
        array_cols = 2 * cols if self.gen.layout == Gen.MAVERICK else cols
        self.p = Program(name, self.gen, rows, array_cols, "", np.zeros((addrmap.PARTITIONS, SBUF_BYTES), np.uint8))
        self.rng = np.random.default_rng(seed)
        self.lines = []
        self.free = 0x100

    def alloc(self, nbytes):
        off = self.free
        self.free += (nbytes + 0xFF) & ~0xFF
        if self.free > SBUF_BYTES:
            raise ValueError("program library SBUF area exhausted")
        return off

    def put(self, partition0, codes, esize):
        """Write codes [partitions, count] at a fresh offset; returns the offset."""
        codes = np.asarray(codes)
        off = self.alloc(codes.shape[1] * esize)
        for i, row in enumerate(codes):
            raw = row.astype({1: np.uint8, 2: np.uint16, 4: np.uint32}[esize]).tobytes()
            self.p.sbuf[partition0 + i, off:off + len(raw)] = np.frombuffer(raw, np.uint8)
        return off

    def values(self, dtype, shape, scale=1.0):
        return dt.from_fp32((self.rng.standard_normal(shape) * scale).astype(np.float32), dtype, self.gen)

    def line(self, text):
        self.lines.append(text)

    def tile(self):
        if self.gen.layout == Gen.MAVERICK:
            return "tile_size=(row_size_log2=r128, col_size_log2=c128) "
        return ""

    def done(self):
        self.p.text = "\n".join(self.lines) + "\n"
        return self.p


def _t3(addr, n, step=1):
    return f"(start_addr={addr}, step_elem=[{step},0,0], num_elem=[{n},1,1])"


def _expect_fp32(p: Program, bank: int, rows_by_partition: np.ndarray, partition0: int = 0, offset: int = 0):
    for i, row in enumerate(rows_by_partition):
        p.expect_fp32[(partition0 + i, bank)] = (offset, np.asarray(row, np.float32).view(np.uint32))


def single(gen="mariana", dtype="bf16", rows=8, cols=8, n=16, fp32_mode=None, seed=1, load_order="first_col_first"):
    """Ldweights + one SINGLE matmul into bank 0."""
    b = _Builder(f"single_{Dtype.parse(dtype).name.lower()}", gen, rows, cols, seed)
    dtype = Dtype.parse(dtype)
    esize = dt.format_of(dtype, b.gen).width // 8
    w, a = b.values(dtype, (rows, cols)), b.values(dtype, (rows, n))
    ow, oa = b.put(0, w, esize), b.put(0, a, esize)
    mode = f"fp32_mode={fp32_mode} " if fp32_mode else ""
    lo = f"flags=(load_order={load_order}) " if b.gen >= Gen.MARIANA else f"load_order={load_order} "
    b.line(f"ldweights in_dtype={dtype.name.lower()} {mode}rows={rows} cols={cols} {b.tile()}{lo}"
           f"src={_t3(f'sbuf(0,{ow:#x})', cols)}")
    acc = "flags=(accumulate_flag=overwrite)" if b.gen.layout == Gen.MAVERICK else "acc=single"
    b.line(f"matmul in_dtype={dtype.name.lower()} {mode}out_dtype=fp32 rows={rows} cols={cols} {b.tile()}{acc} "
           f"src={_t3(f'sbuf(0,{oa:#x})', n)} dst={_t3('psum(0,0,0)', n)}")
    ref = matmul(w, a, in_dtype=dtype, gen=b.gen, fp32_mode=fp32_mode)
    if load_order == "last_col_first":
        ref = ref[::-1]
    _expect_fp32(b.p, 0, ref)
    return b.done()


def accumulate_group(gen="mariana", rows=8, cols=8, n=12, seed=2):
    """Three K tiles: MULTI_START (zero 2 banks), MULTI_MID, MULTI_END into bank 3."""
    b = _Builder("accumulate_group", gen, rows, cols, seed)
    mav = b.gen.layout == Gen.MAVERICK
    total = np.zeros((cols, n), np.float32)
    for i, acc in enumerate(("multi_start zero=banks_2", "multi_mid", "multi_end")):
        w, a = b.values("bf16", (rows, cols)), b.values("bf16", (rows, n))
        ow, oa = b.put(0, w, 2), b.put(0, a, 2)
        lo = "flags=(load_order=first_col_first) " if b.gen >= Gen.MARIANA else "load_order=first_col_first "
        b.line(f"ldweights in_dtype=bf16 rows={rows} cols={cols} {b.tile()}{lo}src={_t3(f'sbuf(0,{ow:#x})', cols)}")
        if mav:
            acc = f"flags=(accumulate_flag={'overwrite' if i == 0 else 'accumulate'})"
        else:
            acc = f"acc={acc}"
        b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows={rows} cols={cols} {b.tile()}{acc} "
               f"src={_t3(f'sbuf(0,{oa:#x})', n)} dst={_t3('psum(0,3,0)', n)}")
        part = matmul(w, a, in_dtype="bf16", gen=b.gen)
        total = part if i == 0 else add_f32(total, part)                    # PSUM: RNE fp32 add
    _expect_fp32(b.p, 3, total)
    if not mav:                                      # the group start cleared bank 4 as well
        for p in range(cols):
            b.p.expect_fp32[(p, 4)] = (0, np.zeros(addrmap.PSUM_BANK_CELLS, np.uint32))
    return b.done()


def zero_region(gen="cayman", rows=8, cols=8, n=8, seed=3):
    """Fill banks 1, 2 and 6; a MULTI_START with zero=banks_2 at bank 1 clears banks 1-2 only."""
    b = _Builder("zero_region", gen, rows, cols, seed)
    w, a = b.values("fp16", (rows, cols)), b.values("fp16", (rows, n))
    ow, oa = b.put(0, w, 2), b.put(0, a, 2)
    lo = "flags=(load_order=first_col_first) " if b.gen >= Gen.MARIANA else "load_order=first_col_first "
    b.line(f"ldweights in_dtype=fp16 rows={rows} cols={cols} {lo}src={_t3(f'sbuf(0,{ow:#x})', cols)}")
    for bank in (1, 2, 6):
        b.line(f"matmul in_dtype=fp16 out_dtype=fp32 rows={rows} cols={cols} acc=single "
               f"src={_t3(f'sbuf(0,{oa:#x})', n)} dst={_t3(f'psum(0,{bank},0x40)', n)}")
    b.line(f"matmul in_dtype=fp16 out_dtype=fp32 rows={rows} cols={cols} acc=multi_start zero=banks_2 "
           f"src={_t3(f'sbuf(0,{oa:#x})', 4)} dst={_t3('psum(0,1,0)', 4)}")
    ref = matmul(w, a, in_dtype="fp16", gen=b.gen)
    for p in range(cols):
        bank1 = np.zeros(addrmap.PSUM_BANK_CELLS, np.float32)
        bank1[:4] = ref[p, :4]
        b.p.expect_fp32[(p, 1)] = (0, bank1.view(np.uint32))
        b.p.expect_fp32[(p, 2)] = (0, np.zeros(addrmap.PSUM_BANK_CELLS, np.uint32))
        b.p.expect_fp32[(p, 6)] = (0x40, ref[p].view(np.uint32))
    return b.done()


def _xorshift(s):
    """xorshift32 (13, 17, 5), D-09: one step of a state (an int or a uint64 array)."""
    s ^= (s << 13) & 0xFFFFFFFF
    s ^= s >> 17
    s ^= (s << 5) & 0xFFFFFFFF
    return s


def _sr_bf16(x, state):
    """D-08: fp32 x to bf16 codes, stochastically rounded with the low 16 bits of the (advanced)
    states; infinities stay, NaN becomes the quiet NaN of its sign (scalars or arrays)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    st = np.asarray(state, np.uint64)
    special = (u & 0x7F800000) == 0x7F800000
    nan = special & ((u & 0x7FFFFF) != 0)
    rounded = ((u + (st & np.uint64(0xFFFF))) >> np.uint64(16)) & np.uint64(0xFFFF)
    return np.where(nan, (u >> np.uint64(16) & np.uint64(0x8000)) | np.uint64(0x7FC0),
                    np.where(special, u >> np.uint64(16), rounded)).astype(np.uint16)


def seed_replay(gen="mariana", rows=8, cols=8, n=6, seed=20):
    """Seed save, perturb, load and replay (D-09, D-18; seed 000 section 5): an SR bf16 matmul into
    bank 6, SaveSeed (the advanced states land in PSUM), LoadSeed of the reset states from SBUF, the
    same weights and matmul again into the same bank: the replay rounds exactly as the first run.
    MARIANA: PeManageSeed (all 16 states of every partition; saved to banks 0-7, cells 0-1).
    MAVERICK: seed_mode matmuls (bank 6's two states of each partition; saved at bank 6 + 0x100)."""
    b = _Builder("seed_replay", gen, rows, cols, seed)
    mav = b.gen.layout == Gen.MAVERICK
    reset = np.array([[SR_STATE_BASE ^ ((p << 8) | s) for p in range(128)] for s in range(16)], np.uint64)
    half = cols                                          # MAVERICK: the array is two halves of `cols`
    if mav:                                              # element c: partition c mod half, state 12 + c / half
        o_seeds = b.put(0, np.concatenate([reset[12, :half], reset[13, :half]])[None, :], 4)
    else:                                                # state s of partition p: partition s, element p
        o_seeds = b.put(0, reset, 4)
    ident = b.put(0, np.array([[0x3F80] * 16]), 2)       # bf16 1.0
    o_one = b.put(0, np.array([[1]]), 4)
    w, a = b.values("bf16", (rows, cols)), b.values("bf16", (rows, n))
    ow, oa = b.put(0, w, 2), b.put(0, a, 2)
    idp = f"identity_dtype=bf16 identity_mem_pattern=(start_addr=sbuf(0,{ident:#x}), step_elem=[1], num_elem=[16])"
    mseed = ("matmul in_dtype=fp32 fp32_mode=high out_dtype=fp32 rows=1 cols=0 "
             "tile_size=(row_size_log2=r64, col_size_log2=c256) flags=(xpose_mode=enabled, seed_mode={}) "
             f"src=(start_addr=sbuf(0,{o_seeds:#x}), step_elem=[1,0,0], num_elem=[{2 * half},1,1]) "
             "dst=(start_addr=psum(0,6,0x100), step_elem=[1,0,1], num_elem=[1,1,2])")
    b.line(f"pe_reg_write reg=psum_round value=1 src=(start_addr=sbuf(0,{o_one:#x}), step_elem=[1], num_elem=[1])")
    for i, off in enumerate((0x10, 0x40)):            # same bank, same element parities: same states
        b.line(f"ldweights in_dtype=bf16 rows={rows} cols={cols} {b.tile()}flags=(load_order=first_col_first) "
               f"src={_t3(f'sbuf(0,{ow:#x})', cols)}")
        # the replay must not zero the bank (CAYMAN / MARIANA): it adds to +0
        acc = "flags=(accumulate_flag=overwrite)" if mav else f"acc={'single' if i == 0 else 'multi_end'}"
        b.line(f"matmul in_dtype=bf16 out_dtype=bf16 rows={rows} cols={cols} {b.tile()}{acc} "
               f"src={_t3(f'sbuf(0,{oa:#x})', n)} dst={_t3(f'psum(0,6,{off:#x})', n)}")
        if i == 0 and mav:
            b.line(mseed.format("save_seed"))
            b.line(mseed.format("load_seed"))
        elif i == 0:
            b.line(f"pe_manage_seed mode=save_seed rows=16 cols=128 {idp} "
                   "dst_seed_mem_pattern=(start_addr=psum(0,0,0), step_elem=[1,512], num_elem=[2,8])")
            b.line(f"pe_manage_seed mode=load_seed rows=16 cols=128 {idp} "
                   f"src_seed_mem_pattern=(start_addr=sbuf(0,{o_seeds:#x}), step_elem=[1,0], num_elem=[128,1])")
    col = matmul(w, a, in_dtype="bf16", gen=b.gen)
    states = reset.T.astype(np.uint32).copy()           # [partition, state]
    cells = np.zeros((cols, n), np.uint16)
    for p in range(cols):
        for v in range(n):
            s = 2 * 6 + ((0x10 // 2 + v) & 1)               # bank 6, parity of the in-bank element index
            states[p, s] = _xorshift(int(states[p, s]))
            cells[p, v] = _sr_bf16(col[p, v], int(states[p, s]))
    for p in range(cols):
        b.p.expect_bf16[(p, 6)] = (0x10, np.concatenate([cells[p], np.zeros(0x18 - n, np.uint16), cells[p]]))
        if mav:
            b.p.expect_fp32[(p, 6)] = (0x100, states[p, 12:14])
    if not mav:
        for p in range(min(128, cols)):
            for bank in range(8):                         # SaveSeed: state 2*bank + j in cell j of the bank
                b.p.expect_fp32[(p, bank)] = (0, states[p, 2 * bank:2 * bank + 2])
    return b.done()


def _sr_states(partitions: int, bank: int) -> np.ndarray:
    """The reset SR states of (partition, bank, element parity) (D-09): [partitions, 2]."""
    return np.array([[SR_STATE_BASE ^ ((p << 8) | (bank << 1) | j) for j in (0, 1)] for p in range(partitions)],
                    np.uint64)


def _bf16_write(cells, col, *, accumulate: bool, sr: bool, states, elem0: int):
    """One matmul's column results col [P, n] written to bf16 cells [P, n] (in-bank elements elem0..):
    an accumulate widens the cell and adds in fp32 (RNE) first; then RNE, or SR with the partition's
    state of the element parity advanced once per write, vectors in order (D-18)."""
    x = add_f32((cells.astype(np.uint32) << 16).view(np.float32), col) if accumulate else col
    if not sr:
        cells[:] = x.astype(ml_dtypes.bfloat16).view(np.uint16)
        return
    for v in range(cells.shape[1]):          # writes to one partition come in vector order
        j = (elem0 + v) & 1
        states[:, j] = _xorshift(states[:, j])
        cells[:, v] = _sr_bf16(x[:, v], states[:, j])


def bf16_drain(gen="mariana", rows=8, cols=8, n=12, sr=False, seed=4):
    """A BF16 destination: two accumulating matmuls, each write rounded by RNE or SR (D-18)."""
    b = _Builder(f"bf16_drain_{'sr' if sr else 'rne'}", gen, rows, cols, seed)
    mav = b.gen.layout == Gen.MAVERICK
    if sr:
        o = b.put(0, np.array([[1]]), 4)
        b.line(f"pe_reg_write reg=psum_round value=1 src=(start_addr=sbuf(0,{o:#x}), step_elem=[1], num_elem=[1])")
    w = b.values("bf16", (rows, cols))
    ow = b.put(0, w, 2)
    lo = "flags=(load_order=first_col_first) "
    b.line(f"ldweights in_dtype=bf16 rows={rows} cols={cols} {b.tile()}{lo}src={_t3(f'sbuf(0,{ow:#x})', cols)}")
    cells = np.zeros((cols, n), np.uint16)
    states = _sr_states(cols, 5)
    for i in range(2):
        a = b.values("bf16", (rows, n), scale=1 + 3 * i)
        oa = b.put(0, a, 2)
        acc = (f"flags=(accumulate_flag={'overwrite' if i == 0 else 'accumulate'})" if mav else
               f"acc={'multi_start' if i == 0 else 'multi_end'}")
        b.line(f"matmul in_dtype=bf16 out_dtype=bf16 rows={rows} cols={cols} {b.tile()}{acc} "
               f"src={_t3(f'sbuf(0,{oa:#x})', n)} dst={_t3('psum(0,5,0x10)', n)}")
        _bf16_write(cells, matmul(w, a, in_dtype="bf16", gen=b.gen), accumulate=i > 0, sr=sr, states=states,
                    elem0=0x10 // 2)
    for p in range(cols):
        b.p.expect_bf16[(p, 5)] = (0x10, cells[p])
    return b.done()


def transpose(gen="mariana", rows=8, cols=8, n=6, seed=5):
    """A transposing matmul: moving[k, n] lands in partition n, element k, bit for bit (D-13); at most
    `cols` vectors (one per column)."""
    n = min(n, cols)
    b = _Builder("transpose", gen, rows, cols, seed)
    a = b.rng.integers(0, 1 << 16, (rows, n), dtype=np.uint64)
    oa = b.put(0, a, 2)
    flags = "flags=(xpose_mode=enabled, accumulate_flag=overwrite)" if b.gen.layout == Gen.MAVERICK else \
        ("flags=(xpose_mode=enabled) acc=single" if b.gen >= Gen.MARIANA else "transpose_mode=enabled acc=single")
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows={rows} cols={cols} {b.tile()}{flags} "
           f"src={_t3(f'sbuf(0,{oa:#x})', n)} dst={_t3('psum(0,2,0)', rows)}")
    for p in range(n):
        b.p.expect_fp32[(p, 2)] = (0, a[:, p].astype(np.uint32))
    return b.done()


def transpose_pattern(gen="mariana", rows=8, cols=8, seed=18):
    """A transpose of FP8 codes along a 2-D pattern (elements 0, 2, 8, 10 of each partition) into a
    BF16 destination: each code zero-extended to 16 bits (D-13)."""
    b = _Builder("transpose_pattern", gen, rows, cols, seed)
    a = b.rng.integers(0, 1 << 8, (rows, 16), dtype=np.uint64)
    oa = b.put(0, a, 1)
    picked = a[:, [0, 2, 8, 10]]
    flags = "flags=(xpose_mode=enabled, accumulate_flag=overwrite)" if b.gen.layout == Gen.MAVERICK else \
        ("flags=(xpose_mode=enabled) acc=single" if b.gen >= Gen.MARIANA else "transpose_mode=enabled acc=single")
    out = "bf16" if b.gen >= Gen.MARIANA else "fp32"
    b.line(f"matmul in_dtype=fp8_e4m3 out_dtype={out} rows={rows} cols={cols} {b.tile()}{flags} "
           f"src=(start_addr=sbuf(0,{oa:#x}), step_elem=[2,8,0], num_elem=[2,2,1]) dst={_t3('psum(0,3,0)', rows)}")
    for p in range(4):
        if out == "bf16":
            b.p.expect_bf16[(p, 3)] = (0, picked[:, p].astype(np.uint16))
        else:
            b.p.expect_fp32[(p, 3)] = (0, picked[:, p].astype(np.uint32))
    return b.done()


def transposed_load(gen="mariana", rows=8, cols=8, n=6, seed=19):
    """Ldweights with xpose_mode: stationary column c comes from partition c, row k from its element
    k along a strided pattern; then a plain matmul."""
    b = _Builder("transposed_load", gen, rows, cols, seed)
    w, a = b.values("bf16", (rows, cols)), b.values("bf16", (rows, n))
    wt = np.zeros((cols, 2 * rows), np.uint64)
    wt[:, ::2] = w.T                                    # element k of partition c at index 2k
    ow, oa = b.put(0, wt, 2), b.put(0, a, 2)
    flags = "flags=(xpose_mode=enabled, load_order=first_col_first) " if b.gen >= Gen.MARIANA else \
        "transpose_mode=enabled load_order=first_col_first "
    acc = "flags=(accumulate_flag=overwrite)" if b.gen.layout == Gen.MAVERICK else "acc=single"
    b.line(f"ldweights in_dtype=bf16 rows={rows} cols={cols} {b.tile()}{flags}"
           f"src={_t3(f'sbuf(0,{ow:#x})', rows, step=2)}")
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows={rows} cols={cols} {b.tile()}{acc} "
           f"src={_t3(f'sbuf(0,{oa:#x})', n)} dst={_t3('psum(0,2,0)', n)}")
    _expect_fp32(b.p, 2, matmul(w, a, in_dtype="bf16", gen=b.gen))
    return b.done()


def invalid_mixed(gen="mariana", rows=8, cols=8, n=8, seed=6):
    """Refused descriptors between valid ones change nothing; the valid ones still compute."""
    b = _Builder("invalid_mixed", gen, rows, cols, seed)
    base = single(gen, "bf16", rows, cols, n, seed=seed)
    b.p.sbuf[:] = base.sbuf
    lines = base.text.strip().splitlines()
    b.lines = [lines[0], ".raw 0x" + "05" + "00" * 63, lines[1].replace("rows=8", "rows=0"), lines[1]]
    b.p.expect_fp32 = base.expect_fp32
    b.p.refused = {1: ErrorCode.BAD_OPCODE, 2: ErrorCode.BAD_ACTIVE_RANGE}
    return b.done()


def _tag_words(tags: np.ndarray, cols: int) -> np.ndarray:
    """LdTags data: 4 tags per u16, the LSB nibble for the larger logical column."""
    words = np.zeros((tags.shape[0], (cols + 3) // 4), np.uint64)
    for m in range(cols):
        words[:, m // 4] |= tags[:, m].astype(np.uint64) << np.uint64(4 * (3 - m % 4))
    return words


def sparse(gen="mariana", rows=8, cols=8, n=6, fmaps=3, seed=7, tags_below=None):
    """LdTags (force_tag_bits 0x4) + Ldweights + MatmulSparse with 3 fmaps per partition; tags drawn
    below `tags_below` (default: the fmaps sent; up to 4: a tag beyond them contributes nothing, D-T26)."""
    b = _Builder("sparse", gen, rows, cols, seed)
    w, a = b.values("fp16", (rows, cols)), b.values("fp16", (rows, fmaps, n))
    tags = b.rng.integers(0, tags_below or fmaps, (rows, cols))
    words = _tag_words(tags, cols)
    ot, ow = b.put(0, words, 2), b.put(0, w, 2)
    oa = b.put(0, a.reshape(rows, fmaps * n), 2)
    b.line(f"ldtags in_dtype=uint16 force_tag_bits=4 rows={rows} cols={cols} {b.tile()}"
           f"src={_t3(f'sbuf(0,{ot:#x})', (cols + 3) // 4)}")
    b.line(f"ldweights in_dtype=fp16 rows={rows} cols={cols} {b.tile()}src={_t3(f'sbuf(0,{ow:#x})', cols)}")
    acc = "flags=(accumulate_flag=overwrite)" if b.gen.layout == Gen.MAVERICK else "acc=single"
    b.line(f"matmul_sparse in_dtype=fp16 out_dtype=fp32 rows={rows} cols={cols} {b.tile()}{acc} "
           f"src=(start_addr=sbuf(0,{oa:#x}), step_elem=[1,0,0,{n}], num_elem=[{n},1,1,{fmaps}]) "
           f"dst={_t3('psum(0,1,0)', n)}")
    ref = matmul(w, a, in_dtype="fp16", gen=b.gen, tags=tags)
    _expect_fp32(b.p, 1, ref[::-1])                        # default load order: logical m -> column cols-1-m
    return b.done()


def sparse_mixed(gen="mariana", rows=8, cols=8, n=5, seed=17):
    """Sparse and dense matmuls back to back: MatmulSparse (2 fmaps), a dense Matmul (the change of
    matmul kind waits for the sparse one to complete), a second LdTags (waits for the sparse
    matmul's last vector to leave the array) and MatmulSparse (4 fmaps) into banks 1-3."""
    b = _Builder("sparse_mixed", gen, rows, cols, seed)
    acc = "flags=(accumulate_flag=overwrite)" if b.gen.layout == Gen.MAVERICK else "acc=single"
    for bank, fmaps in ((1, 2), (2, 0), (3, 4)):
        w = b.values("fp16", (rows, cols))
        ow = b.put(0, w, 2)
        dst = _t3(f"psum(0,{bank},0)", n)
        if fmaps:
            a = b.values("fp16", (rows, fmaps, n))
            tags = b.rng.integers(0, fmaps, (rows, cols))
            words = _tag_words(tags, cols)
            ot, oa = b.put(0, words, 2), b.put(0, a.reshape(rows, fmaps * n), 2)
            b.line(f"ldtags in_dtype=uint16 force_tag_bits=0 rows={rows} cols={cols} {b.tile()}"
                   f"src={_t3(f'sbuf(0,{ot:#x})', (cols + 3) // 4)}")
            b.line(f"ldweights in_dtype=fp16 rows={rows} cols={cols} {b.tile()}src={_t3(f'sbuf(0,{ow:#x})', cols)}")
            b.line(f"matmul_sparse in_dtype=fp16 out_dtype=fp32 rows={rows} cols={cols} {b.tile()}{acc} "
                   f"src=(start_addr=sbuf(0,{oa:#x}), step_elem=[1,0,0,{n}], num_elem=[{n},1,1,{fmaps}]) dst={dst}")
            ref = matmul(w, a, in_dtype="fp16", gen=b.gen, tags=tags)
        else:
            a = b.values("fp16", (rows, n))
            oa = b.put(0, a, 2)
            b.line(f"ldweights in_dtype=fp16 rows={rows} cols={cols} {b.tile()}src={_t3(f'sbuf(0,{ow:#x})', cols)}")
            b.line(f"matmul in_dtype=fp16 out_dtype=fp32 rows={rows} cols={cols} {b.tile()}{acc} "
                   f"src={_t3(f'sbuf(0,{oa:#x})', n)} dst={dst}")
            ref = matmul(w, a, in_dtype="fp16", gen=b.gen)
        _expect_fp32(b.p, bank, ref[::-1])                  # default load order: logical m -> column cols-1-m
    return b.done()


def tag_weight(gen="mariana", rows=8, cols=8, n=6, seed=13):
    """Ldweights in TAG_WEIGHT mode: {u16 weight, u16 tag} elements load weights and tags at once."""
    b = _Builder("tag_weight", gen, rows, cols, seed)
    w, a = b.values("bf16", (rows, cols)), b.values("bf16", (rows, 2, n))
    tags = b.rng.integers(0, 2, (rows, cols))
    ow = b.put(0, w.astype(np.uint64) | (tags.astype(np.uint64) << np.uint64(16)), 4)
    oa = b.put(0, a.reshape(rows, 2 * n), 2)
    lo = "flags=(load_order=first_col_first) " if b.gen >= Gen.MARIANA else "load_order=first_col_first "
    b.line(f"ldweights in_dtype=bf16 tag_weight_mode=tag_weight rows={rows} cols={cols} {lo}"
           f"src={_t3(f'sbuf(0,{ow:#x})', cols)}")
    b.line(f"matmul_sparse in_dtype=bf16 out_dtype=fp32 rows={rows} cols={cols} acc=single "
           f"src=(start_addr=sbuf(0,{oa:#x}), step_elem=[1,0,0,{n}], num_elem=[{n},1,1,2]) dst={_t3('psum(0,1,0)', n)}")
    _expect_fp32(b.p, 1, matmul(w, a, in_dtype="bf16", gen=b.gen, tags=tags))
    return b.done()


def backpressure(gen="mariana", rows=8, cols=8, n=6, seed=22):
    """A one-entry instruction FIFO (queue_cfg.fifo_size_sel) and a 3-cycle inter-instruction delay:
    the engine holds desc_ready low while the FIFO is full, the testbench waits, nothing is lost."""
    b = _Builder("backpressure", gen, rows, cols, seed)
    base = accumulate_group(gen, rows, cols, n, seed=seed)
    b.p.sbuf[:] = base.sbuf
    b.lines = base.text.strip().splitlines()
    b.p.expect_fp32 = base.expect_fp32
    b.p.regs = {"queue_cfg": _reg_value("queue_cfg", fifo_size_sel=1),
                "arr_cluster_cfg": _reg_value("arr_cluster_cfg", en_inter_instr_dly=1, inter_instr_dly_cnt=3)}
    return b.done()


def _reg_value(name: str, **fields) -> int:
    """A register's reset value with `fields` replaced (model/arr_seq_regs.py)."""
    value = 0
    for f, spec in REGISTERS[name]["fields"].items():
        value |= (fields.get(f, spec.get("reset", 0)) & ((1 << spec["width"]) - 1)) << spec["lsb"]
    return value


def reg_write_bypass(gen="cayman", rows=8, cols=8, n=8, seed=14):
    """PeRegWrite with queue_cfg.bypass_peregwrite_instr: the immediate value, no SBUF fetch
    (the SBUF word it names holds an invalid value, which must not be read)."""
    b = _Builder("reg_write_bypass", gen, rows, cols, seed)
    base = single(gen, "bf16", rows, cols, n, seed=seed)
    b.p.sbuf[:] = base.sbuf
    b.p.sbuf[0, 0x3F00:0x3F04] = 0xFF
    b.lines = ["pe_reg_write reg=psum_round value=0 src=(start_addr=sbuf(0,0x3f00), step_elem=[1], num_elem=[1])"] + \
        base.text.strip().splitlines()
    b.p.expect_fp32 = base.expect_fp32
    b.p.regs = {"queue_cfg": 1 << 4}
    return b.done()


MX_EXTREME_SCALES = (0, 1, 127, 254, 255, 120, 200)     # E8M0: 2^-127, 2^-126, 1, 2^127, NaN, ...


def _mx_tiles(b, dtype, pack, rows, cols, n, special=False):
    k = rows * pack
    if not special:
        w, a = b.values(dtype, (k, cols)), b.values(dtype, (k, n))
        sw = b.rng.integers(118, 136, (k // 32, cols))
        sa = b.rng.integers(118, 136, (k // 32, n))
        return w, a, sw, sa
    # element columns / vectors of every kind; scales cycling through the extremes and NaN in the
    # first block (every pair of extremes meets: 2^254 overflows, 2^-254 underflows), random after
    w = _special_matrix(b, dtype, k, cols, COLUMN_KINDS)
    a = _special_matrix(b, dtype, k, n, VECTOR_KINDS)
    ext = np.array(MX_EXTREME_SCALES)
    sw, sa = b.rng.choice(ext, (k // 32, cols)), b.rng.choice(ext, (k // 32, n))
    sw[0] = ext[np.arange(cols) % ext.size]
    sa[0] = ext[(np.arange(n) + 3) % ext.size]
    return w, a, sw, sa


def _mx_index(perf: str, count: int, pack: int) -> np.ndarray:
    """Element index of (vector v, slot j) in the data pattern, [count, pack] (D-T25): v * pack + j;
    interleave j * count + v; tiled by t = min(32, count) vectors, each tile j-major."""
    v, j = np.arange(count)[:, None], np.arange(pack)[None, :]
    if perf.endswith("interleave"):
        return j * count + v
    if perf.endswith("tiled"):
        t = min(32, count)
        return (v // t) * t * pack + j * t + v % t
    return v * pack + j


def _put_mx(b, codes, pack, count, dtype, scales, perf="quad_row"):
    """The data in the perf mode's element order and block scales (one byte per vector in the
    block's first partition); returns (data offset, scale offset)."""
    rows = codes.shape[0] // pack
    grid = np.zeros((rows, count * pack), codes.dtype)
    grid[:, _mx_index(perf, count, pack)] = codes.reshape(rows, pack, count).transpose(0, 2, 1)
    if dt.format_of(dtype, b.gen).width == 4:
        packed = np.stack([dt.pack_nibbles(r.astype(np.uint8)) for r in grid])
        od = b.put(0, packed, 1)
    else:
        od = b.put(0, grid, 1)
    sc = np.zeros((rows, count), np.uint64)
    for blk in range(scales.shape[0]):
        sc[blk * (32 // pack)] = scales[blk]
    return od, b.put(0, sc, 1)


def mx(gen="maverick", dtype="fp8_e4m3", perf="quad_row", rows=8, cols=8, n=8, seed=8, special=False):
    """MX matmul with E8M0 block scales: MAVERICK through MXTensorV2 patterns, MARIANA through
    LdweightsMX / MatmulMX (D-21, D-T25).  special: elements of every value class and scales at the
    extremes and NaN (specials(), MX_EXTREME_SCALES)."""
    b = _Builder(f"mx_{'specials_' if special else ''}{Dtype.parse(dtype).name.lower()}_{perf}", gen, rows, cols, seed)
    dtype = Dtype.parse(dtype)
    pack = 4 if perf.startswith("quad") else 8
    w, a, sw, sa = _mx_tiles(b, dtype, pack, rows, cols, n, special)
    owd, ows = _put_mx(b, w, pack, cols, dtype, sw, perf)
    oad, oas = _put_mx(b, a, pack, n, dtype, sa, perf)
    dn = dtype.name.lower()
    if b.gen.layout == Gen.MAVERICK:
        def pat(od, osc, count):
            return (f"mxtensor_v2(data_addr=sbuf(0,{od:#x}), scale_addr=sbuf(0,{osc:#x}), num_elem=[{count * pack},1], "
                    f"p_f_dim=0x23, scale_dtype=sfp8_e8)")
        b.line(f"ldweights in_dtype={dn} rows={rows} cols={cols} {b.tile()}perf_mode={perf} "
               f"flags=(load_order=first_col_first) src={pat(owd, ows, cols)}")
        b.line(f"matmul in_dtype={dn} out_dtype=fp32 rows={rows} cols={cols} {b.tile()}perf_mode={perf} "
               f"flags=(accumulate_flag=overwrite) src={pat(oad, oas, n)} dst={_t3('psum(0,2,0)', n)}")
    else:
        def pat(od, osc, count):
            return f"(data_addr=sbuf(0,{od:#x}), scale_addr=sbuf(0,{osc:#x}), step_elem=1, num_elem={count * pack})"
        b.line(f"ldweights_mx in_dtype={dn} rows={rows} cols={cols} perf_mode={perf} "
               f"flags=(load_order=first_col_first) src={pat(owd, ows, cols)}")
        b.line(f"matmul_mx in_dtype={dn} out_dtype=fp32 rows={rows} cols={cols} perf_mode={perf} acc=single "
               f"src={pat(oad, oas, n)} dst={_t3('psum(0,2,0)', n)}")
    ref = matmul(w, a, in_dtype=dtype, gen=b.gen, perf_mode=perf, stationary_scales=sw, moving_scales=sa)
    b.p.pack = pack
    _expect_fp32(b.p, 2, ref)
    return b.done()


def double_row(gen="cayman", rows=8, cols=8, n=10, seed=9):
    """FP8 double row: two contraction elements per PE per cycle (perf_opt DOUBLE_ROW)."""
    b = _Builder("double_row", gen, rows, cols, seed)
    w, a = b.values("fp8_e5m2", (2 * rows, cols)), b.values("fp8_e5m2", (2 * rows, n))
    ow = b.put(0, w.reshape(rows, 2, cols).transpose(0, 2, 1).reshape(rows, 2 * cols), 1)
    oa = b.put(0, a.reshape(rows, 2, n).transpose(0, 2, 1).reshape(rows, 2 * n), 1)
    lo = "flags=(load_order=first_col_first) " if b.gen >= Gen.MARIANA else "load_order=first_col_first "
    b.line(f"ldweights in_dtype=fp8_e5m2 perf_opt=double_row rows={rows} cols={cols} {lo}"
           f"src={_t3(f'sbuf(0,{ow:#x})', 2 * cols)}")
    b.line(f"matmul in_dtype=fp8_e5m2 perf_opt=double_row out_dtype=fp32 rows={rows} cols={cols} acc=single "
           f"src={_t3(f'sbuf(0,{oa:#x})', 2 * n)} dst={_t3('psum(0,0,0)', n)}")
    _expect_fp32(b.p, 0, matmul(w, a, in_dtype="fp8_e5m2", gen=b.gen, perf_mode="double_row"))
    return b.done()


def tiles(gen="cayman", rows=8, cols=8, n=6, seed=10):
    """Two independent quarter tiles hold different weights; each matmul uses its own."""
    b = _Builder("tiles", gen, rows, cols, seed)
    mav = b.gen.layout == Gen.MAVERICK
    r, c = rows // 2, cols // 2
    lo = "flags=(load_order=first_col_first) " if b.gen >= Gen.MARIANA else "load_order=first_col_first "
    acc = "flags=(accumulate_flag=overwrite)" if mav else "acc=single"
    matmuls = []
    for rsel, csel, bank in ((0, 0, 1), (1, 1, 2)):
        w, a = b.values("bf16", (r, c)), b.values("bf16", (r, n))
        ow, oa = b.put(0, w, 2), b.put(0, a, 2)
        where = (f"tile_size=(row_size_log2=r64, col_size_log2=c128) tile_sel=(row_sel={rsel}, col_sel={csel}) "
                 if mav else f"row_grp={2 * rsel} col_grp={2 * csel} ")
        b.line(f"ldweights in_dtype=bf16 rows={r} cols={c} {where}{lo}src={_t3(f'sbuf(0,{ow:#x})', c)}")
        matmuls.append(f"matmul in_dtype=bf16 out_dtype=fp32 rows={r} cols={c} {where}{acc} "
                       f"src={_t3(f'sbuf(0,{oa:#x})', n)} dst={_t3(f'psum(0,{bank},0)', n)}")
        _expect_fp32(b.p, bank, matmul(w, a, in_dtype="bf16", gen=b.gen))
    for text in matmuls:                   # both loads first: the second stays pending in its tile
        b.line(text)
    return b.done()


def c256(rows=8, cols=16, n=6, seed=11):
    """MAVERICK's full-width pump: columns 0-127 and 128-255 share partitions, dst upper dim 2."""
    b = _Builder("c256", "maverick", rows, cols // 2, seed)
    w, a = b.values("bf16", (rows, cols)), b.values("bf16", (rows, n))
    ow, oa = b.put(0, w, 2), b.put(0, a, 2)
    t = "tile_size=(row_size_log2=r128, col_size_log2=c256) "
    b.line(f"ldweights in_dtype=bf16 rows={rows} cols=0 {t}flags=(load_order=first_col_first) "
           f"src={_t3(f'sbuf(0,{ow:#x})', cols)}")
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows={rows} cols=0 {t}flags=(accumulate_flag=overwrite) "
           f"src={_t3(f'sbuf(0,{oa:#x})', n)} "
           f"dst=(start_addr=psum(0,4,0), step_elem=[1,0,512], num_elem=[{n},1,2])")
    ref = matmul(w, a, in_dtype="bf16", gen="maverick")
    _expect_fp32(b.p, 4, ref[:cols // 2])
    _expect_fp32(b.p, 5, ref[cols // 2:])
    return b.done()


def c256_sr(rows=4, cols=8, n=10, seed=21):
    """c256 into BF16 cells of one bank with stochastic rounding, more vectors than half the columns:
    both column halves write a partition in the same cycle with the same SR state (same bank, same
    element parity); the lower half's write draws first (D-09, D-18)."""
    b = _Builder("c256_sr", "maverick", rows, cols // 2, seed)
    half = cols // 2
    w, a = b.values("bf16", (rows, cols)), b.values("bf16", (rows, n))
    ow, oa, one = b.put(0, w, 2), b.put(0, a, 2), b.put(0, np.array([[1]]), 4)
    t = "tile_size=(row_size_log2=r128, col_size_log2=c256) "
    b.line(f"pe_reg_write reg=psum_round value=1 src=(start_addr=sbuf(0,{one:#x}), step_elem=[1], num_elem=[1])")
    b.line(f"ldweights in_dtype=bf16 rows={rows} cols=0 {t}flags=(load_order=first_col_first) "
           f"src={_t3(f'sbuf(0,{ow:#x})', cols)}")
    b.line(f"matmul in_dtype=bf16 out_dtype=bf16 rows={rows} cols=0 {t}flags=(accumulate_flag=overwrite) "
           f"src={_t3(f'sbuf(0,{oa:#x})', n)} "
           f"dst=(start_addr=psum(0,4,0x20), step_elem=[1,0,{2 * n}], num_elem=[{n},1,2])")
    ref = matmul(w, a, in_dtype="bf16", gen="maverick")
    cells = np.zeros((half, 3 * n), np.uint16)            # slot 1 starts 2n elements on
    for p in range(half):
        # column p writes vector v in cycle v + p, column p + half in v + p + half; slot 0 first
        order = sorted([(v + p, 0, v) for v in range(n)] + [(v + p + half, 1, v) for v in range(n)])
        states = {}
        for _, slot, v in order:
            elem = 0x20 // 2 + slot * 2 * n + v
            key = elem & 1
            st = _xorshift(states.get(key, SR_STATE_BASE ^ ((p << 8) | (4 << 1) | key)))
            states[key] = st
            cells[p, slot * 2 * n + v] = _sr_bf16(ref[p + slot * half, v], st)
    for p in range(half):
        b.p.expect_bf16[(p, 4)] = (0x20, cells[p])
    return b.done()


def lut(gen="mariana", rows=8, cols=8, n=8, seed=12):
    """ConvLutLoad of 32 bf16 entries; Ldweights in LUT mode reads UINT8 indices through it."""
    b = _Builder("lut", gen, rows, cols, seed)
    table = b.values("bf16", (1, 32))
    idx = b.rng.integers(0, 32, (rows, cols))
    a = b.values("bf16", (rows, n))
    ot, oi, oa = b.put(0, table, 2), b.put(0, idx, 1), b.put(0, a, 2)
    b.line(f"conv_lut_load in_dtype=bf16 num_entries=32 src=(start_addr=sbuf(0,{ot:#x}), step_elem=[1], num_elem=[32])")
    b.line(f"ldweights in_dtype=uint8 rows={rows} cols={cols} {b.tile()}"
           "flags=(scalar_mode=lut, load_order=first_col_first) "
           f"src={_t3(f'sbuf(0,{oi:#x})', cols)}")
    acc = "flags=(accumulate_flag=overwrite)" if b.gen.layout == Gen.MAVERICK else "acc=single"
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows={rows} cols={cols} {b.tile()}{acc} "
           f"src={_t3(f'sbuf(0,{oa:#x})', n)} dst={_t3('psum(0,0,0)', n)}")
    _expect_fp32(b.p, 0, matmul(table[0][idx], a, in_dtype="bf16", gen=b.gen))
    # the moving operand through the table too: UINT8 indices in a LUT-mode matmul
    aidx = b.rng.integers(0, 32, (rows, n))
    oai = b.put(0, aidx, 1)
    flags = "flags=(scalar_mode=lut, accumulate_flag=overwrite)" if b.gen.layout == Gen.MAVERICK else \
        "flags=(scalar_mode=lut) acc=single"
    b.line(f"matmul in_dtype=uint8 out_dtype=fp32 rows={rows} cols={cols} {b.tile()}{flags} "
           f"src={_t3(f'sbuf(0,{oai:#x})', n)} dst={_t3('psum(0,1,0)', n)}")
    _expect_fp32(b.p, 1, matmul(table[0][idx], table[0][aidx], in_dtype="bf16", gen=b.gen))
    return b.done()


# --- special values end to end ------------------------------------------------------------------

_F32_POOL = {"nan": [0x7FC00000, 0xFFC00000, 0x7FA00000], "inf": [0x7F800000, 0xFF800000],
             "zero": [0x00000000, 0x80000000], "max": [0x7F7FFFFF, 0xFF7FFFFF],
             "sub": [0x00000001, 0x80000001, 0x007FFFFF, 0x80400000, 0x00000400]}
COLUMN_KINDS = ("normal", "mixed", "max", "sub")
VECTOR_KINDS = ("mixed", "negsub", "normal", "max", "sub", "negzero", "one_special")
_MIX = {"normal": 0.45, "sub": 0.2, "zero": 0.1, "max": 0.1, "inf": 0.075, "nan": 0.075}


def _code_pool(dtype, gen) -> dict:
    """The codes of each value class of a format: nan, inf, zero, max (+-largest finite), sub
    (subnormals), all from the codes' values (cosim/oracle.py decodes them)."""
    return _code_pool_of(Dtype.parse(dtype), Gen.parse(gen))


@functools.lru_cache(maxsize=None)
def _code_pool_of(dtype, gen) -> dict:
    width = dt.format_of(dtype, gen).width
    if width == 32:
        return {k: np.array(v, np.uint64) for k, v in _F32_POOL.items()}
    codes = np.arange(1 << width, dtype=np.uint64)
    v = decode(codes, dtype, gen).float64()
    finite = np.isfinite(v)
    mant = _MANT_BITS[dtype]
    exp_field = (codes >> np.uint64(mant)) & np.uint64((1 << (width - 1 - mant)) - 1)
    top = np.abs(v[finite]).max()
    return {"nan": codes[np.isnan(v)], "inf": codes[np.isinf(v)], "zero": codes[finite & (v == 0)],
            "max": codes[finite & (np.abs(v) == top)], "sub": codes[finite & (v != 0) & (exp_field == 0)]}


_MANT_BITS = {Dtype.BFLOAT16: 7, Dtype.FP16: 10, Dtype.FP8_EXP2: 5, Dtype.FP8_EXP3: 4, Dtype.FP8_EXP4: 3,
              Dtype.FP8_EXP5: 2, Dtype.FP4_EXP2: 1}


def _special_codes(b, dtype, count: int, kind: str) -> np.ndarray:
    """`count` codes of one kind: normal values; a mix of every class (_MIX); +-max finite;
    subnormals of either sign or negative only; -0 everywhere; normal values with one NaN or +-Inf."""
    pool = {k: v for k, v in _code_pool(dtype, b.gen).items() if v.size}
    normal = b.values(dtype, (count,)).astype(np.uint64)
    if kind == "normal":
        return normal
    if kind == "mixed":
        classes = [c for c in _MIX if c == "normal" or c in pool]
        weights = np.array([_MIX[c] for c in classes])
        pick = b.rng.choice(len(classes), count, p=weights / weights.sum())
        return np.array([normal[i] if classes[c] == "normal" else b.rng.choice(pool[classes[c]])
                         for i, c in enumerate(pick)], np.uint64)
    if kind in ("max", "sub"):
        return b.rng.choice(pool.get(kind, pool["max"]), count).astype(np.uint64)
    sign = np.uint64(1 << (dt.format_of(dtype, b.gen).width - 1))
    if kind == "negsub":
        return b.rng.choice(pool.get("sub", pool["max"]), count).astype(np.uint64) | sign
    if kind == "negzero":
        return np.full(count, sign, np.uint64)
    out = normal.copy()                      # one_special (+-max where the format has no NaN or Inf)
    specials = [pool[k] for k in ("inf", "nan") if k in pool] or [pool["max"]]
    out[b.rng.integers(0, count)] = b.rng.choice(np.concatenate(specials))
    return out


def _special_matrix(b, dtype, rows, count, kinds) -> np.ndarray:
    """[rows, count] codes, column j of kind kinds[j % len(kinds)]."""
    return np.stack([_special_codes(b, dtype, rows, kinds[j % len(kinds)]) for j in range(count)], 1)


def specials(gen="mariana", dtype="bf16", rows=8, cols=8, n=12, fp32_mode=None, out_dtype="fp32", sr=False,
             seed=23):
    """Special values through the whole engine.  Stationary columns of normal values, a mix of every
    class (NaN, +-Inf, +-0, +-max finite, subnormals), +-max finite (overflow to Inf, Inf - Inf = NaN)
    and subnormals; moving vectors of those kinds, negative subnormals (underflow to -0 and
    subnormal results), -0, and normal values with one NaN or Inf (at least 7 vectors, one of each).
    One matmul writes bank 6; an accumulate group in bank 7 adds a second matmul to a first with its
    even vectors negated (exact cancellation to +0, Inf - Inf = NaN in PSUM).  FP32 or BF16 cells
    (RNE or SR)."""
    dtype = Dtype.parse(dtype)
    out = Dtype.parse(out_dtype)
    n = max(n, len(VECTOR_KINDS))
    tag = f"_{fp32_mode}" if fp32_mode else ""
    b = _Builder(f"specials_{dtype.name.lower()}{tag}{'' if out == Dtype.FP32 else '_bf16_sr' if sr else '_bf16'}",
                 gen, rows, cols, seed)
    mav = b.gen.layout == Gen.MAVERICK
    esize = dt.format_of(dtype, b.gen).width // 8
    if sr:
        o = b.put(0, np.array([[1]]), 4)
        b.line(f"pe_reg_write reg=psum_round value=1 src=(start_addr=sbuf(0,{o:#x}), step_elem=[1], num_elem=[1])")
    w = _special_matrix(b, dtype, rows, cols, COLUMN_KINDS)
    a1 = _special_matrix(b, dtype, rows, n, VECTOR_KINDS)
    a2 = _special_matrix(b, dtype, rows, n, VECTOR_KINDS[3:] + VECTOR_KINDS[:3])
    a3 = _special_matrix(b, dtype, rows, n, VECTOR_KINDS[1:] + VECTOR_KINDS[:1])
    a3[:, ::2] = a2[:, ::2] ^ np.uint64(1 << (8 * esize - 1))          # even vectors negated: the sums cancel
    ow = b.put(0, w, esize)
    mode = f"fp32_mode={fp32_mode} " if fp32_mode else ""
    lo = "flags=(load_order=first_col_first) " if b.gen >= Gen.MARIANA else "load_order=first_col_first "
    b.line(f"ldweights in_dtype={dtype.name.lower()} {mode}rows={rows} cols={cols} {b.tile()}{lo}"
           f"src={_t3(f'sbuf(0,{ow:#x})', cols)}")
    flags = ["overwrite", "overwrite", "accumulate"] if mav else ["single", "multi_start", "multi_end"]
    cells = {6: np.zeros((cols, n), np.uint16), 7: np.zeros((cols, n), np.uint16)}
    states = {6: _sr_states(cols, 6), 7: _sr_states(cols, 7)}
    total = {}
    for i, (a, bank) in enumerate(((a1, 6), (a2, 7), (a3, 7))):
        oa = b.put(0, a, esize)
        acc = f"flags=(accumulate_flag={flags[i]})" if mav else f"acc={flags[i]}"
        b.line(f"matmul in_dtype={dtype.name.lower()} {mode}out_dtype={out.name.lower()} rows={rows} cols={cols} "
               f"{b.tile()}{acc} src={_t3(f'sbuf(0,{oa:#x})', n)} dst={_t3(f'psum(0,{bank},0)', n)}")
        col = matmul(w, a, in_dtype=dtype, gen=b.gen, fp32_mode=fp32_mode)
        if out == Dtype.BFLOAT16:
            _bf16_write(cells[bank], col, accumulate=i == 2, sr=sr, states=states[bank], elem0=0)
        else:
            total[bank] = add_f32(total[bank], col) if i == 2 else col
    for bank in (6, 7):
        if out == Dtype.BFLOAT16:
            for p in range(cols):
                b.p.expect_bf16[(p, bank)] = (0, cells[bank][p])
        else:
            _expect_fp32(b.p, bank, total[bank])
    return b.done()


def all_codes(gen="mariana", dtype="fp8_e5m2", rows=8, cols=8, perf_mode=None, seed=24):
    """Every code of an 8-bit format (NaN and Inf where the format has them, subnormals, +-0, +-max)
    as moving data, once each, against stationary columns of every kind (specials()); FP8 double row
    (two products per step, one rounding) when perf_mode="double_row"."""
    dtype = Dtype.parse(dtype)
    pack = 2 if perf_mode == "double_row" else 1
    b = _Builder(f"all_codes_{dtype.name.lower()}{'_double_row' if pack == 2 else ''}", gen, rows, cols, seed)
    k = rows * pack
    n = -(-256 // k)
    a = np.concatenate([b.rng.permutation(256), b.rng.integers(0, 256, k * n - 256)]).astype(np.uint64).reshape(k, n)
    w = _special_matrix(b, dtype, k, cols, COLUMN_KINDS)
    dn = dtype.name.lower()
    lo = "flags=(load_order=first_col_first) " if b.gen >= Gen.MARIANA else "load_order=first_col_first "
    po = "perf_opt=double_row " if pack == 2 else ""
    acc = "flags=(accumulate_flag=overwrite)" if b.gen.layout == Gen.MAVERICK else "acc=single"
    # double row: the two contraction elements of a PE sit next to each other in the partition
    ow = b.put(0, w.reshape(rows, pack, cols).transpose(0, 2, 1).reshape(rows, pack * cols), 1)
    oa = b.put(0, a.reshape(rows, pack, n).transpose(0, 2, 1).reshape(rows, pack * n), 1)
    b.line(f"ldweights in_dtype={dn} {po}rows={rows} cols={cols} {b.tile()}{lo}src={_t3(f'sbuf(0,{ow:#x})', pack * cols)}")
    b.line(f"matmul in_dtype={dn} {po}out_dtype=fp32 rows={rows} cols={cols} {b.tile()}{acc} "
           f"src={_t3(f'sbuf(0,{oa:#x})', pack * n)} dst={_t3('psum(0,6,0)', n)}")
    _expect_fp32(b.p, 6, matmul(w, a, in_dtype=dtype, gen=b.gen, perf_mode=perf_mode))
    return b.done()


def library(gen, rows: int = 8, cols: int = 8, n: int | None = None) -> list:
    """Every library program that exists on `gen`: rows x cols arrays (MAVERICK: rows x 2 cols),
    n vectors per matmul where the program leaves it free (None: each program's own default)."""
    gen = Gen.parse(gen)
    kw = {"rows": rows, "cols": cols} | ({"n": n} if n else {})
    progs = [single(gen, "bf16", **kw), single(gen, "fp16", load_order="last_col_first", **kw),
             single(gen, "fp8_e4m3", **kw), single(gen, "fp32", fp32_mode="low_high", **kw),
             accumulate_group(gen, **kw), transpose(gen, **kw), transpose_pattern(gen, rows, cols),
             transposed_load(gen, **kw), invalid_mixed(gen, **kw)]
    progs += [sparse(gen, **kw), sparse_mixed(gen, **kw), tiles(gen, **kw), reg_write_bypass(gen, **kw),
              backpressure(gen, **kw)]
    if gen.layout != Gen.MAVERICK:
        progs += [zero_region(gen, **kw)] + ([double_row(gen, **kw)] if gen >= DOUBLE_ROW_FROM else [])
    if gen >= Gen.MARIANA:
        progs += [bf16_drain(gen, **kw), bf16_drain(gen, sr=True, **kw), lut(gen, **kw),
                  mx(gen, "fp8_e4m3", "quad_row", **kw), mx(gen, "fp4_e2m1", "oct_row", **kw),
                  mx(gen, "fp8_e5m2", "quad_row_interleave", rows, cols, n=12),
                  # tiles of 32 vectors; MAVERICK's MXTENSOR_V2 holds at most 255 elements per dimension
                  mx(gen, "fp8_e4m3", "oct_row_tiled", rows, cols, n=16 if gen.layout == Gen.MAVERICK else 64),
                  sparse(gen, fmaps=2, seed=15, **kw), sparse(gen, fmaps=4, seed=16, **kw)]
    if gen.layout != Gen.MAVERICK:
        progs.append(tag_weight(gen, **kw))
    if gen >= Gen.MARIANA:
        progs.append(seed_replay(gen, **kw))
    if gen == Gen.MAVERICK:
        progs += [c256(rows, 2 * cols, **({"n": n} if n else {})), c256_sr(rows, 2 * cols, n=max(n or 0, cols + 2)),
                  mx(gen, "int4", "quad_row", **kw)]
    # special values end to end (NaN, Inf, subnormals, overflow, signed zeros, extreme / NaN MX scales)
    progs += [specials(gen, "bf16", **kw), specials(gen, "fp16", **kw),
              specials(gen, "fp32", fp32_mode="low_high", **kw), specials(gen, "fp32", fp32_mode="high", **kw),
              all_codes(gen, "fp8_e4m3", rows, cols), all_codes(gen, "fp8_e5m2", rows, cols)]
    if gen.layout != Gen.MAVERICK:       # double row from CAYMAN (D-T97)
        progs.append(all_codes(gen, "fp8_e3m4", rows, cols, perf_mode="double_row" if gen >= DOUBLE_ROW_FROM else None))
    if gen == Gen.MAVERICK:
        progs.append(all_codes(gen, "fp8_exp2", rows, cols))
    if gen >= Gen.MARIANA:
        progs += [specials(gen, "bf16", out_dtype="bf16", **kw), specials(gen, "fp8_e5m2", out_dtype="bf16", sr=True, **kw),
                  mx(gen, "fp8_e5m2", "quad_row", special=True, **kw), mx(gen, "fp8_e4m3", "oct_row", special=True, **kw)]
    # the corners the RTL once refused (D-T40) that fit the library's array
    if gen >= Gen.MARIANA:
        progs += [transposed_load_packed(gen, rows, cols), lut_sparse(gen, rows, cols)]
    if gen >= Gen.MARIANA and gen.layout != Gen.MAVERICK:
        progs.append(transposed_load_fp4(gen, rows, cols))
    if gen == Gen.MAVERICK:
        progs += [mx_rows(gen, "int4", "quad_row_tiled", rows, cols, n=64, n0=(4, 32), gap=1),
                  mx_rows_unaligned(gen, "quad", rows, cols), seed_mode_load(gen, rows, cols)]
    return progs


# --- the corners the RTL once refused (D-T40) ---------------------------------------------------

def _xpose_flags(b) -> str:
    """The flags of a transposing matmul (MAVERICK: in its c128 tile, which writes partitions 0..C/2-1)."""
    if b.gen.layout == Gen.MAVERICK:
        return b.tile() + "flags=(xpose_mode=enabled, accumulate_flag=overwrite)"
    return "flags=(xpose_mode=enabled) acc=single" if b.gen >= Gen.MARIANA else "transpose_mode=enabled acc=single"


def _expect_xpose(p: Program, bank: int, picked: np.ndarray, bf16: bool):
    """A transpose's PSUM: element e of partition k (picked [partitions, elements], codes in pattern
    order) in partition e, cell k of the bank, zero-extended (D-13)."""
    for e in range(picked.shape[1]):
        if bf16:
            p.expect_bf16[(e, bank)] = (0, picked[:, e].astype(np.uint16))
        else:
            p.expect_fp32[(e, bank)] = (0, picked[:, e].astype(np.uint32))


def _pick(codes: np.ndarray, steps, nums) -> np.ndarray:
    """The elements of a TENSOR3D-like pattern (element steps, counts, dim 0 fastest): [partitions, count]."""
    idx = np.zeros(1, np.int64)
    for s, n in zip(steps, nums):
        idx = (np.arange(n)[:, None] * s + idx[None, :]).reshape(-1)
    return codes[:, idx]


def transpose_wide(gen="mariana", rows=8, cols=8, seed=40):
    """Transposes of one element per column (MAVERICK: of the c128 tile) where the columns outnumber
    the rows (D-T40 (1)): 16-bit elements of every row's partition, then, back to back, 32-bit
    elements along a 2-D pattern of fewer partitions."""
    b = _Builder("transpose_wide", gen, rows, cols, seed)
    ncols = n = min(cols, addrmap.PARTITIONS)
    flags = _xpose_flags(b)
    bf16 = b.gen >= Gen.MARIANA
    a = b.rng.integers(0, 1 << 16, (rows, n), dtype=np.uint64)
    oa = b.put(0, a, 2)
    b.line(f"matmul in_dtype=bf16 out_dtype={'bf16' if bf16 else 'fp32'} rows={rows} cols={ncols} {flags} "
           f"src={_t3(f'sbuf(0,{oa:#x})', n)} dst={_t3('psum(0,2,0)', rows)}")
    _expect_xpose(b.p, 2, a, bf16)
    n0 = 4 if n % 4 == 0 else n
    steps, nums, parts = (2, 2 * n0 + 3), (n0, n // n0), rows // 2 + 1
    c = b.rng.integers(0, 1 << 32, (parts, (nums[1] - 1) * steps[1] + 2 * n0), dtype=np.uint64)
    oc = b.put(0, c, 4)
    b.line(f"matmul in_dtype=fp32 fp32_mode=high out_dtype=fp32 rows={parts} cols={ncols} {flags} "
           f"src=(start_addr=sbuf(0,{oc:#x}), step_elem=[{steps[0]},{steps[1]},0], num_elem=[{nums[0]},{nums[1]},1]) "
           f"dst={_t3('psum(0,3,0)', parts)}")
    _expect_xpose(b.p, 3, _pick(c, steps, nums), False)
    return b.done()


def transpose_rounds(rows=4, cols=8, n=6, vecs=3, seed=48):
    """MAVERICK on a rows x 2 cols array (rows < cols): a transpose of n elements per partition
    (rows < n < 2 rows: element r + rows of row r for the first n - rows rows only, the other rows'
    second round and every later round empty) in the right c128 tile (start column cols), then
    matmuls on the right and the left tile right after it, whose columns hold the transpose's
    empty rounds' columns (n .. 2 cols - 1)."""
    b = _Builder("transpose_rounds", "maverick", rows, cols, seed)
    if not rows < n < min(2 * rows, cols + 1):
        raise ValueError(f"transpose_rounds needs rows < n < 2 rows and n <= cols (rows {rows}, cols {cols}, n {n})")
    tile = "tile_size=(row_size_log2=r128, col_size_log2=c128) tile_sel=(row_sel=0, col_sel={}) "
    right, left = tile.format(1), tile.format(0)
    ws = [b.values("bf16", (rows, cols)) for _ in range(2)]
    for w, where in zip(ws, (right, left)):
        b.line(f"ldweights in_dtype=bf16 rows={rows} cols={cols} {where}flags=(load_order=first_col_first) "
               f"src={_t3(f'sbuf(0,{b.put(0, w, 2):#x})', cols)}")
    x = b.rng.integers(0, 1 << 16, (rows, n), dtype=np.uint64)
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows={rows} cols={n} {right}"
           f"flags=(xpose_mode=enabled, accumulate_flag=overwrite) src={_t3(f'sbuf(0,{b.put(0, x, 2):#x})', n)} "
           f"dst={_t3('psum(0,2,0)', rows)}")
    _expect_xpose(b.p, 2, x, False)
    for bank, w, where in ((3, ws[0], right), (4, ws[1], left)):
        a = b.values("bf16", (rows, vecs))
        b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows={rows} cols={cols} {where}"
               f"flags=(accumulate_flag=overwrite) src={_t3(f'sbuf(0,{b.put(0, a, 2):#x})', vecs)} "
               f"dst={_t3(f'psum(0,{bank},0)', vecs)}")
        _expect_fp32(b.p, bank, matmul(w, a, in_dtype="bf16", gen=b.gen))
    return b.done()


def _nibbles(codes: np.ndarray) -> np.ndarray:
    """[partitions, count] 4-bit codes as bytes, two per byte, low nibble first (D-06)."""
    c = np.concatenate([codes, np.zeros((codes.shape[0], codes.shape[1] % 2), codes.dtype)], 1).astype(np.uint8)
    return c[:, 0::2] | (c[:, 1::2] << 4)


def transpose_packed(gen="mariana", rows=8, cols=8, seed=41):
    """Transposes of packed data, one element per PE step whatever the pump (D-13): FP8 double row
    (CAYMAN, MARIANA), FP4 codes along an odd nibble step (MARIANA), and MAVERICK's MXTensorV2
    patterns of two dims (FP8 with the quad-row pump, FP4 with the oct-row pump; E8M0 scales, unused)."""
    b = _Builder("transpose_packed", gen, rows, cols, seed)
    n, flags, bank = min(cols, addrmap.PARTITIONS), _xpose_flags(b), 1
    bf16 = b.gen >= Gen.MARIANA
    out = f"out_dtype={'bf16' if bf16 else 'fp32'} rows={rows} cols={n} {flags}"
    if b.gen.layout != Gen.MAVERICK:
        a = b.rng.integers(0, 1 << 8, (rows, n), dtype=np.uint64)
        b.line(f"matmul in_dtype=fp8_e5m2 perf_opt=double_row {out} "
               f"src={_t3(f'sbuf(0,{b.put(0, a, 1):#x})', n)} dst={_t3(f'psum(0,{bank},0)', rows)}")
        _expect_xpose(b.p, bank, a, bf16)
    if b.gen == Gen.MARIANA:
        bank += 1
        a = b.rng.integers(0, 16, (rows, 3 * n), dtype=np.uint64)
        b.line(f"matmul in_dtype=fp4_e2m1 {out} src={_t3(f'sbuf(0,{b.put(0, _nibbles(a), 1):#x})', n, step=3)} "
               f"dst={_t3(f'psum(0,{bank},0)', rows)}")
        _expect_xpose(b.p, bank, a[:, ::3][:, :n], bf16)
    if b.gen.layout == Gen.MAVERICK:
        n0 = 2 if n % 2 == 0 else 1
        for dtype, perf, width, s1 in (("fp8_e4m3", "quad_row", 8, n0 + 3), ("fp4_e2m1", "oct_row", 4, n0 + 1)):
            bank += 1
            a = b.rng.integers(0, 1 << width, (rows, (n // n0 - 1) * s1 + n0), dtype=np.uint64)
            od = b.put(0, a if width == 8 else _nibbles(a), 1)
            osc = b.put(0, b.rng.integers(118, 136, (rows, n)), 1)
            b.line(f"matmul in_dtype={dtype} perf_mode={perf} {out} src=mxtensor_v2(data_addr=sbuf(0,{od:#x}), "
                   f"scale_addr=sbuf(0,{osc:#x}), num_elem=[{n0},{n // n0}], step_elem_data_1={s1}, p_f_dim=0x23, "
                   f"scale_dtype=sfp8_e8) dst={_t3(f'psum(0,{bank},0)', rows)}")
            _expect_xpose(b.p, bank, _pick(a, (1, s1), (n0, n // n0)), bf16)
    return b.done()


def _put_mx_rows(b, codes, pack, count, dtype, scales, perf, n0, gap):
    """_put_mx along a 2-D MXTensorV2 pattern: element e of the order at (e mod n0) + (e div n0) * s1,
    s1 = n0 + gap (elements; nibbles for 4-bit codes); returns (data offset, scale offset, s1)."""
    rows = codes.shape[0] // pack
    grid = np.zeros((rows, count * pack), np.uint64)
    grid[:, _mx_index(perf, count, pack)] = codes.reshape(rows, pack, count).transpose(0, 2, 1)
    s1, e = n0 + gap, np.arange(count * pack)
    data = np.zeros((rows, (count * pack // n0 - 1) * s1 + n0), np.uint64)
    data[:, e % n0 + e // n0 * s1] = grid
    od = b.put(0, _nibbles(data) if dt.format_of(dtype, b.gen).width == 4 else data, 1)
    sc = np.zeros((rows, count), np.uint64)
    for blk in range(scales.shape[0]):
        sc[blk * (32 // pack)] = scales[blk]
    return od, b.put(0, sc, 1), s1


def mx_rows(gen="maverick", dtype="fp8_e4m3", perf="quad_row", rows=8, cols=8, n=8, n0=(8, 4), gap=3, seed=42,
            c256=False):
    """A MAVERICK MX matmul whose weights and moving data are MXTensorV2 patterns of several rows
    (num_elem[1] > 1): n0 = (weights, moving) elements per row, rows gap + n0 elements apart; the
    gathers follow the element order across rows, with E8M0 block scales (D-21, D-T25, D-T40 (5)).
    `c256`: on all `cols` columns of the array (both halves, results in banks 2 and 3)."""
    dtype = Dtype.parse(dtype)
    name = f"mx_rows_{dtype.name.lower()}_{perf}_{n0[1]}" + ("_c256" if c256 else "")
    b = _Builder(name, gen, rows, cols // 2 if c256 else cols, seed)
    _mx_rows_pair(b, dtype, perf, rows, cols, n, n0, gap, 2, c256)
    return b.done()


# MXTensorV2 patterns whose rows split the element order's units (a vector's or a weight column's
# `pack` elements across rows): (dtype, perf, moving vectors, n0 (weights, moving), gap), for 4 columns
MX_ROWS_UNALIGNED = {
    "quad": [("fp8_e4m3", "quad_row", 6, (2, 6), 3), ("fp4_e2m1", "quad_row", 6, (2, 3), 1),
             ("fp8_e5m2", "quad_row_interleave", 6, (8, 8), 2), ("int4", "quad_row_interleave", 10, (8, 20), 3),
             ("fp8_e4m3", "quad_row_tiled", 64, (8, 64), 1), ("fp4_e2m1", "quad_row_tiled", 64, (16, 16), 3)],
    "oct": [("fp8_e4m3", "oct_row", 6, (4, 12), 1), ("fp4_e2m1", "oct_row_interleave", 6, (16, 12), 3),
            ("int4", "oct_row_tiled", 64, (8, 64), 1)],
}


def mx_rows_unaligned(gen="maverick", pump="quad", rows=8, cols=4, seed=48):
    """MAVERICK MX matmuls over MXTensorV2 patterns of several rows that split the element order's
    units (MX_ROWS_UNALIGNED: packed rows of n0 not a multiple of pack, interleaved ones of n1 not a
    multiple of pack, tiled ones of neither one tile nor one slot of a tile), each pair of Ldweights
    and Matmul into a bank of its own, with E8M0 block scales (D-T40 (5))."""
    b = _Builder(f"mx_rows_unaligned_{pump}", gen, rows, cols, seed)
    for bank, (dtype, perf, n, n0, gap) in enumerate(MX_ROWS_UNALIGNED[pump]):
        _mx_rows_pair(b, Dtype.parse(dtype), perf, rows, cols, n, n0, gap, bank)
    return b.done()


def _mx_rows_pair(b, dtype, perf, rows, cols, n, n0, gap, bank, c256=False):
    """Ldweights and Matmul over MXTensorV2 patterns of n0 = (weights, moving) elements per row (mx_rows),
    results in PSUM bank `bank` (c256: banks bank and bank + 1), their expectations from the oracle."""
    pack = 4 if perf.startswith("quad") else 8
    w, a, sw, sa = _mx_tiles(b, dtype, pack, rows, cols, n)
    dn, lines = dtype.name.lower(), []
    for count, codes, scales, width in ((cols, w, sw, n0[0]), (n, a, sa, n0[1])):
        od, osc, s1 = _put_mx_rows(b, codes, pack, count, dtype, scales, perf, width, gap)
        lines.append(f"mxtensor_v2(data_addr=sbuf(0,{od:#x}), scale_addr=sbuf(0,{osc:#x}), "
                     f"num_elem=[{width},{count * pack // width}], step_elem_data_1={s1}, p_f_dim=0x23, "
                     "scale_dtype=sfp8_e8)")
    tile, ncols = ("tile_size=(row_size_log2=r128, col_size_log2=c256) ", 0) if c256 else (b.tile(), cols)
    dst = f"(start_addr=psum(0,{bank},0), step_elem=[1,0,512], num_elem=[{n},1,2])" if c256 else \
        _t3(f"psum(0,{bank},0)", n)
    b.line(f"ldweights in_dtype={dn} rows={rows} cols={ncols} {tile}perf_mode={perf} "
           f"flags=(load_order=first_col_first) src={lines[0]}")
    b.line(f"matmul in_dtype={dn} out_dtype=fp32 rows={rows} cols={ncols} {tile}perf_mode={perf} "
           f"flags=(accumulate_flag=overwrite) src={lines[1]} dst={dst}")
    ref = matmul(w, a, in_dtype=dtype, gen=b.gen, perf_mode=perf, stationary_scales=sw, moving_scales=sa)
    for half, part in enumerate(np.split(ref, 2) if c256 else [ref]):
        _expect_fp32(b.p, bank + half, part)
    b.p.pack = max(b.p.pack or 1, pack)


def lut_sparse(gen="mariana", rows=8, cols=8, n=6, fmaps=4, seed=43):
    """MatmulSparse in LUT mode (D-T15, D-T40 (4)): every fmap of a vector is a UINT8 index into the
    ConvLutLoad table (bf16 entries); LdTags picks each PE's fmap."""
    return _lut_sparse("lut_sparse", "bf16", gen, rows, cols, n, fmaps, seed)


def _lut_sparse(name, table_dtype, gen, rows, cols, n, fmaps, seed):
    """ConvLutLoad of 64 `table_dtype` entries, LdTags, bf16 Ldweights, a LUT-mode MatmulSparse of
    `fmaps` UINT8 indices per vector; the expectation from the oracle (fp32 entries: the weights as
    the fp32 codes of their values, the whole product fused)."""
    b = _Builder(name, gen, rows, cols, seed)
    esize = 4 if table_dtype == "fp32" else 2
    table = b.values(table_dtype, (1, 64))
    w = b.values("bf16", (rows, cols))
    idx = b.rng.integers(0, 64, (rows, fmaps, n))
    tags = b.rng.integers(0, fmaps, (rows, cols))
    ot, otg, ow = b.put(0, table, esize), b.put(0, _tag_words(tags, cols), 2), b.put(0, w, 2)
    oa = b.put(0, idx.reshape(rows, fmaps * n), 1)
    mav = b.gen.layout == Gen.MAVERICK
    flags = "flags=(scalar_mode=lut, accumulate_flag=overwrite)" if mav else "flags=(scalar_mode=lut) acc=single"
    b.line(f"conv_lut_load in_dtype={table_dtype} num_entries=64 "
           f"src=(start_addr=sbuf(0,{ot:#x}), step_elem=[1], num_elem=[64])")
    b.line(f"ldtags in_dtype=uint16 force_tag_bits=0 rows={rows} cols={cols} {b.tile()}"
           f"src={_t3(f'sbuf(0,{otg:#x})', (cols + 3) // 4)}")
    b.line(f"ldweights in_dtype=bf16 rows={rows} cols={cols} {b.tile()}flags=(load_order=first_col_first) "
           f"src={_t3(f'sbuf(0,{ow:#x})', cols)}")
    b.line(f"matmul_sparse in_dtype=uint8 out_dtype=fp32 rows={rows} cols={cols} {b.tile()}{flags} "
           f"src=(start_addr=sbuf(0,{oa:#x}), step_elem=[1,0,0,{n}], num_elem=[{n},1,1,{fmaps}]) "
           f"dst={_t3('psum(0,1,0)', n)}")
    if table_dtype == "fp32":
        w32 = w.astype(np.uint32) << np.uint32(16)          # bf16 codes as the fp32 codes of their values
        ref = matmul(w32, table[0][idx], in_dtype="fp32", gen=b.gen, tags=tags[:, ::-1])
    else:
        ref = matmul(w, table[0][idx], in_dtype="bf16", gen=b.gen, tags=tags[:, ::-1])
    _expect_fp32(b.p, 1, ref)
    return b.done()


def transposed_load_packed(gen="mariana", rows=4, cols=8, n=5, seed=49):
    """Transposing Ldweights of packed weights (D-13, D-T40 (1)): row k of column m takes elements
    k * pack + j of partition m's pattern (2-D, n0 elements a row, rows gap + n0 apart), then a matmul
    of the same pump.  MARIANA: FP8 double row; MAVERICK: MX FP8 quad row and FP4 oct row over
    MXTensorV2 patterns, with E8M0 block scales."""
    b = _Builder("transposed_load_packed", gen, rows, cols, seed)
    flags = "flags=(xpose_mode=enabled, load_order=first_col_first)"
    if b.gen.layout == Gen.MAVERICK:
        cases = [("fp8_e4m3", "quad_row", 4, 8, 1), ("fp4_e2m1", "oct_row", 8, 16, 3)]
    else:
        cases = [("fp8_e5m2", "double_row", 2, 4, 3)]
    for bank, (dtype, perf, pack, n0, gap) in enumerate(cases):
        dtype = Dtype.parse(dtype)
        k, s1, mx = rows * pack, n0 + gap, perf != "double_row"
        w, a, sw, sa = _mx_tiles(b, dtype, pack, rows, cols, n)
        e = np.arange(k)
        data = np.zeros((cols, (-(-k // n0) - 1) * s1 + n0), np.uint64)
        data[:, e % n0 + e // n0 * s1] = w.T                    # partition m: column m's k elements
        od = b.put(0, _nibbles(data) if dt.format_of(dtype, b.gen).width == 4 else data, 1)
        dn = dtype.name.lower()
        if mx:
            osc = b.put(0, _block_scales(sw, pack, cols), 1)
            src = (f"mxtensor_v2(data_addr=sbuf(0,{od:#x}), scale_addr=sbuf(0,{osc:#x}), num_elem=[{n0},{k // n0}], "
                   f"step_elem_data_1={s1}, p_f_dim=0x23, scale_dtype=sfp8_e8)")
            oad, oas = _put_mx(b, a, pack, n, dtype, sa, perf)
            mv = (f"mxtensor_v2(data_addr=sbuf(0,{oad:#x}), scale_addr=sbuf(0,{oas:#x}), num_elem=[{n * pack},1], "
                  "p_f_dim=0x23, scale_dtype=sfp8_e8)")
            b.line(f"ldweights in_dtype={dn} rows={rows} cols={cols} {b.tile()}perf_mode={perf} {flags} src={src}")
            b.line(f"matmul in_dtype={dn} out_dtype=fp32 rows={rows} cols={cols} {b.tile()}perf_mode={perf} "
                   f"flags=(accumulate_flag=overwrite) src={mv} dst={_t3(f'psum(0,{bank},0)', n)}")
            ref = matmul(w, a, in_dtype=dtype, gen=b.gen, perf_mode=perf, stationary_scales=sw, moving_scales=sa)
        else:
            src = f"(start_addr=sbuf(0,{od:#x}), step_elem=[1,{s1},0], num_elem=[{n0},{k // n0},1])"
            oa = b.put(0, a.reshape(rows, 2, n).transpose(0, 2, 1).reshape(rows, 2 * n), 1)
            b.line(f"ldweights in_dtype={dn} perf_opt=double_row rows={rows} cols={cols} {b.tile()}{flags} src={src}")
            b.line(f"matmul in_dtype={dn} perf_opt=double_row out_dtype=fp32 rows={rows} cols={cols} {b.tile()}"
                   f"acc=single src={_t3(f'sbuf(0,{oa:#x})', 2 * n)} dst={_t3(f'psum(0,{bank},0)', n)}")
            ref = matmul(w, a, in_dtype=dtype, gen=b.gen, perf_mode=perf)
        _expect_fp32(b.p, bank, ref)
        b.p.pack = max(b.p.pack or 1, pack)
    return b.done()


def _block_scales(scales, pack, count):
    """E8M0 block scales [blocks, count] as partitions: block b's in the block's first partition."""
    sc = np.zeros(((scales.shape[0] - 1) * (32 // pack) + 1, count), np.uint64)
    for blk in range(scales.shape[0]):
        sc[blk * (32 // pack)] = scales[blk]
    return sc


def transposed_load_fp4(gen="mariana", rows=8, cols=8, n=6, seed=44):
    """A transposing Ldweights of FP4 codes (4-bit: nibbles, every third one of each column's
    partition, low and high ones), then a bf16 matmul: FP4 weights hold bf16 values exactly (D-13,
    D-T40 (1))."""
    b = _Builder("transposed_load_fp4", gen, rows, cols, seed)
    wt = b.rng.integers(0, 16, (cols, 3 * rows), dtype=np.uint64)     # element k of partition c: nibble 3k
    w = decode(wt[:, ::3].T, "fp4_e2m1", b.gen).float64().astype(np.float32).astype(ml_dtypes.bfloat16)
    a = b.values("bf16", (rows, n))
    ow, oa = b.put(0, _nibbles(wt), 1), b.put(0, a, 2)
    acc = "flags=(accumulate_flag=overwrite)" if b.gen.layout == Gen.MAVERICK else "acc=single"
    b.line(f"ldweights in_dtype=fp4_e2m1 rows={rows} cols={cols} {b.tile()}"
           "flags=(xpose_mode=enabled, load_order=first_col_first) "
           f"src=(start_addr=sbuf(0,{ow:#x}), step_elem=[3,0,0], num_elem=[{rows},1,1])")
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows={rows} cols={cols} {b.tile()}{acc} "
           f"src={_t3(f'sbuf(0,{oa:#x})', n)} dst={_t3('psum(0,2,0)', n)}")
    _expect_fp32(b.p, 2, matmul(w.view(np.uint16), a, in_dtype="bf16", gen=b.gen))
    return b.done()


def sparse_fp32(gen="mariana", rows=8, cols=8, n=6, fmaps=3, fp32_mode="low_high", seed=45):
    """MatmulSparse of FP32 data and weights (an engine built with `sparse32`, D-T40 (3)): LdTags,
    Ldweights, then fp32_mode's passes over each PE's tagged fmap, as a dense FP32 matmul (D-12)."""
    b = _Builder(f"sparse_fp32_{fp32_mode}", gen, rows, cols, seed)
    w, a = b.values("fp32", (rows, cols)), b.values("fp32", (rows, fmaps, n))
    tags = b.rng.integers(0, fmaps, (rows, cols))
    ot, ow = b.put(0, _tag_words(tags, cols), 2), b.put(0, w, 4)
    oa = b.put(0, a.reshape(rows, fmaps * n), 4)
    mode = f"fp32_mode={fp32_mode}"
    b.line(f"ldtags in_dtype=uint16 force_tag_bits=4 rows={rows} cols={cols} {b.tile()}"
           f"src={_t3(f'sbuf(0,{ot:#x})', (cols + 3) // 4)}")
    b.line(f"ldweights in_dtype=fp32 {mode} rows={rows} cols={cols} {b.tile()}src={_t3(f'sbuf(0,{ow:#x})', cols)}")
    acc = "flags=(accumulate_flag=overwrite)" if b.gen.layout == Gen.MAVERICK else "acc=single"
    b.line(f"matmul_sparse in_dtype=fp32 {mode} out_dtype=fp32 rows={rows} cols={cols} {b.tile()}{acc} "
           f"src=(start_addr=sbuf(0,{oa:#x}), step_elem=[1,0,0,{n}], num_elem=[{n},1,1,{fmaps}]) "
           f"dst={_t3('psum(0,1,0)', n)}")
    ref = matmul(w, a, in_dtype="fp32", gen=b.gen, fp32_mode=fp32_mode, tags=tags)
    _expect_fp32(b.p, 1, ref[::-1])                        # default load order: logical m -> column cols-1-m
    return b.done()


def lut_sparse_fp32(gen="mariana", rows=8, cols=8, n=6, fmaps=4, seed=46):
    """MatmulSparse in LUT mode through a table of FP32 entries (an engine built with `sparse32`,
    D-T40 (3)) and bf16 weights: each PE fuses its whole FP32 product (fp32_mode NONE, D-12)."""
    return _lut_sparse("lut_sparse_fp32", "fp32", gen, rows, cols, n, fmaps, seed)


def seed_mode_load(gen="maverick", rows=8, cols=8, n=4, seed=47):
    """MAVERICK: a Ldweights carrying seed_mode in the seed micro-op's shape (FP32 HIGH, transposing,
    one row, all columns; seed 000 section 5.1) loads weights as any transposing load does, as in the
    model (D-T40 (2)); a FP32 HIGH matmul then reads row 0."""
    b = _Builder("seed_mode_load", gen, rows, cols, seed)
    w, a = b.values("fp32", (1, 2 * cols)), b.values("fp32", (1, n))      # c256: both column halves
    ow, oa = b.put(0, w.T, 4), b.put(0, a, 4)
    b.line("ldweights in_dtype=fp32 fp32_mode=high rows=1 cols=0 tile_size=(row_size_log2=r64, col_size_log2=c256) "
           f"flags=(xpose_mode=enabled, seed_mode=load_seed, load_order=first_col_first) "
           f"src={_t3(f'sbuf(0,{ow:#x})', 1)}")
    b.line(f"matmul in_dtype=fp32 fp32_mode=high out_dtype=fp32 rows=1 cols={cols} {b.tile()}"
           f"flags=(accumulate_flag=overwrite) src={_t3(f'sbuf(0,{oa:#x})', n)} dst={_t3('psum(0,2,0)', n)}")
    _expect_fp32(b.p, 2, matmul(w[:, :cols], a, in_dtype="fp32", gen=b.gen, fp32_mode="high"))
    return b.done()
