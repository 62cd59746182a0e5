"""Every PE descriptor layout, per layout generation (CAYMAN, MARIANA, MAVERICK).

Offsets the seed gives (seed 000 sections 3-5, 7, 9, 11) are tested in tests/test_isa.py; the
bytes the seed leaves open are placed as docs/decisions.md D-T14..D-T21 record."""
from __future__ import annotations

from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa.enums import (FP32Mode, LoadOrder, MXPerfMode, Opcode, PeReg, PerfOpt, ScalarMode,
                             SeedMode, AccumulateMode, TagWeightMode, TileColSize, TileRowSize,
                             XposeMode, ZeroRegion)
from tensore.model.isa.struct import Array, Bits, EnumByte, Ignored, Int, Reserved, Sub, Union, struct

U8, U16, I16, U32 = Int(1), Int(2), Int(2, True), Int(4)
DTYPE = EnumByte(Dtype)

# Address markers in the first ADDR4 of a MEM_PATTERN3D (D-19 for MX; D-T18 for indirect).
MARKER_MXTENSOR_V2 = 0x0000_0001
MARKER_INDIRECT16B = 0x8000_0000

HEADER = struct("HEADER", (0, "opcode", EnumByte(Opcode)), (1, "pad", Ignored(3)))
EVENTS = struct("EVENTS", (0, "wait_event", U8), (1, "set_event", U8), (2, "reserved", Reserved(6)))
EVENT_NONE = 0xFF
NUM_EVENTS = 64          # events 0..63 exist (D-T20)


def tensor(n: int):
    """TENSORnD = ADDR4 start_addr, int16 step_elem[n], uint16 num_elem[n] (D-20)."""
    return struct(f"TENSOR{n}D", (0, "start_addr", U32), (4, "step_elem", Array(I16, n)),
                  (4 + 2 * n, "num_elem", Array(U16, n)))


TENSOR1D, TENSOR2D, TENSOR3D, TENSOR4D = tensor(1), tensor(2), tensor(3), tensor(4)

MXTENSOR_V2 = struct(                                   # seed 004 section 1b, verbatim
    "MXTENSOR_V2", (0, "data_addr", U32), (4, "scale_addr", U32), (8, "num_elem", Array(U8, 2)),
    (10, "step_elem_data_1", I16), (12, "step_elem_scale_1", I16), (14, "p_f_dim", U8),
    (15, "scale_dtype", DTYPE))

INDIRECT16B = struct(                                   # D-T18
    "INDIRECT16B", (0, "start_addr", U32), (4, "index_addr", U32), (8, "step_elem", Array(I16, 2)),
    (12, "num_elem", Array(U16, 2)))


def _select_pattern(chunk: bytes, gen) -> str:
    addr = int.from_bytes(chunk[:4], "little")
    if Gen.parse(gen).layout == Gen.MAVERICK and addr & MARKER_MXTENSOR_V2:
        return "mxtensor_v2"
    if addr & MARKER_INDIRECT16B:
        return "indirect16b"
    return "tensor3d"


_MARKED = {"mxtensor_v2": ("data_addr", MARKER_MXTENSOR_V2), "indirect16b": ("start_addr", MARKER_INDIRECT16B)}


def _mark(name: str, fields: dict) -> dict:
    if name in _MARKED:
        key, bit = _MARKED[name]
        fields = dict(fields)
        fields[key] = int(fields.get(key, 0)) | bit
    return fields


def _unmark(name: str, fields: dict) -> dict:
    if name in _MARKED:
        key, bit = _MARKED[name]
        fields[key] = fields[key] & ~bit
    return fields


MEM_PATTERN3D = Union((("tensor3d", TENSOR3D), ("indirect16b", INDIRECT16B),
                       ("mxtensor_v2", MXTENSOR_V2)), _select_pattern, _mark, _unmark)

MXMEM_PATTERN1D = struct(                               # D-T18 (MARIANA LdweightsMX / MatmulMX)
    "MXMEM_PATTERN1D", (0, "data_addr", U32), (4, "scale_addr", U32), (8, "index_addr", U32),
    (12, "step_elem", I16), (14, "num_elem", U16))

MATMUL_FLAGS = Bits((("scalar_mode", 2, ScalarMode), ("seed_mode", 2, SeedMode),
                     ("accumulate_flag", 1, AccumulateMode), ("xpose_mode", 1, XposeMode),
                     ("reserved", 2, None)))
LD_WEIGHT_FLAGS = Bits((("xpose_mode", 1, XposeMode), ("scalar_mode", 2, ScalarMode),
                        ("seed_mode", 2, SeedMode), ("load_order", 1, LoadOrder),
                        ("reserved", 2, None)))
TILE_SEL = Bits((("row_sel", 4, None), ("col_sel", 4, None)))
TILE_SIZE = Bits((("row_size_log2", 4, TileRowSize), ("col_size_log2", 4, TileColSize)))

_HEAD = ((0, "header", Sub(HEADER)), (4, "events", Sub(EVENTS)))


def _s(name, *fields):
    return struct(name, *_HEAD, *fields, size=64)


# --- MAVERICK (NC-v5): seed 000 sections 3, 4, 11 -------------------------------------------------
MAVERICK = {
    Opcode.LDWEIGHTS: _s(
        "S3_LW", (12, "reserved0", Reserved(4)), (16, "src_mem_pattern", MEM_PATTERN3D),
        (32, "in_dtype", DTYPE), (33, "fp32_mode", EnumByte(FP32Mode)), (34, "num_active_rows", U8),
        (35, "num_active_cols", U8), (36, "tile_size", TILE_SIZE), (37, "tile_sel", TILE_SEL),
        (38, "flags", LD_WEIGHT_FLAGS), (39, "perf_mode", EnumByte(MXPerfMode)),
        (40, "reserved1", Reserved(24))),
    Opcode.MATMUL: _s(
        "S3D3_MM", (12, "reserved0", Reserved(4)), (16, "src_mem_pattern", MEM_PATTERN3D),
        (32, "in_dtype", DTYPE), (33, "fp32_mode", EnumByte(FP32Mode)), (34, "out_dtype", DTYPE),
        (35, "num_active_rows", U8), (36, "num_active_cols", U8), (37, "tile_size", TILE_SIZE),
        (38, "tile_sel", TILE_SEL), (39, "flags", MATMUL_FLAGS), (40, "perf_mode", EnumByte(MXPerfMode)),
        (41, "reserved1", Reserved(7)), (48, "dst_mem_pattern", MEM_PATTERN3D)),
    Opcode.MATMUL_SPARSE: _s(
        "S4D3_MM", (12, "src_mem_pattern", Sub(TENSOR4D)), (32, "in_dtype", DTYPE),
        (33, "fp32_mode", EnumByte(FP32Mode)), (34, "out_dtype", DTYPE), (35, "num_active_rows", U8),
        (36, "num_active_cols", U8), (37, "tile_size", TILE_SIZE), (38, "tile_sel", TILE_SEL),
        (39, "flags", MATMUL_FLAGS), (40, "reserved1", Reserved(8)), (48, "dst_mem_pattern", Sub(TENSOR3D))),
    Opcode.LDTAGS: _s(
        "S3_LT", (12, "reserved0", Reserved(4)), (16, "src_mem_pattern", Sub(TENSOR3D)),
        (32, "in_dtype", DTYPE), (33, "force_tag_bits", U8), (34, "num_active_rows", U8),
        (35, "num_active_cols", U8), (36, "tile_size", TILE_SIZE), (37, "tile_sel", TILE_SEL),
        (38, "reserved1", Reserved(26))),
}

# --- MARIANA / MARIANA_PLUS (NC-v4) -------------------------------------------------------------
MARIANA = {
    Opcode.LDWEIGHTS: _s(
        "S3_LW", (12, "bg_xpose_mode", U8), (13, "reserved0", Reserved(3)),
        (16, "src_mem_pattern", MEM_PATTERN3D), (32, "in_dtype", DTYPE), (33, "fp32_mode", EnumByte(FP32Mode)),
        (34, "reserved1", Reserved(1)), (35, "perf_opt", EnumByte(PerfOpt)),
        (36, "tag_weight_mode", EnumByte(TagWeightMode)), (37, "reserved2", Reserved(1)),
        (38, "num_active_rows", U8), (39, "num_active_cols", U8), (40, "reserved3", Reserved(4)),
        (44, "row_grp", U8), (45, "col_grp", U8), (46, "reserved4", Reserved(1)),
        (47, "flags", LD_WEIGHT_FLAGS), (48, "reserved5", Reserved(16))),
    Opcode.MATMUL: _s(
        "S3D3_MM", (12, "reserved0", Reserved(4)), (16, "src_mem_pattern", MEM_PATTERN3D),
        (32, "in_dtype", DTYPE), (33, "fp32_mode", EnumByte(FP32Mode)), (34, "reserved1", Reserved(1)),
        (35, "perf_opt", EnumByte(PerfOpt)), (36, "reserved2", Reserved(2)), (38, "num_active_rows", U8),
        (39, "num_active_cols", U8), (40, "out_dtype", DTYPE), (41, "reserved3", Reserved(1)),
        (42, "flags", MATMUL_FLAGS), (43, "psum_accumulate_flags", U8), (44, "row_grp", U8),
        (45, "col_grp", U8), (46, "reserved4", Reserved(1)), (47, "psum_zero_region", EnumByte(ZeroRegion)),
        (48, "dst_mem_pattern", Sub(TENSOR3D))),
    Opcode.MATMUL_SPARSE: _s(
        "S4D3_MM", (12, "src_mem_pattern", Sub(TENSOR4D)), (32, "in_dtype", DTYPE),
        (33, "fp32_mode", EnumByte(FP32Mode)), (34, "reserved1", Reserved(4)), (38, "num_active_rows", U8),
        (39, "num_active_cols", U8), (40, "out_dtype", DTYPE), (41, "reserved2", Reserved(1)),
        (42, "flags", MATMUL_FLAGS), (43, "psum_accumulate_flags", U8), (44, "row_grp", U8),
        (45, "col_grp", U8), (46, "reserved3", Reserved(1)), (47, "psum_zero_region", EnumByte(ZeroRegion)),
        (48, "dst_mem_pattern", Sub(TENSOR3D))),
    Opcode.LDTAGS: _s(
        "S3_LT", (12, "reserved0", Reserved(4)), (16, "src_mem_pattern", Sub(TENSOR3D)),
        (32, "in_dtype", DTYPE), (33, "force_tag_bits", U8), (34, "reserved1", Reserved(4)),
        (38, "num_active_rows", U8), (39, "num_active_cols", U8), (40, "reserved2", Reserved(4)),
        (44, "row_grp", U8), (45, "col_grp", U8), (46, "reserved3", Reserved(18))),
    Opcode.PE_MANAGE_SEED: _s(                           # seed 000 section 5, verbatim
        "S2S1D2_PE_SEED", (12, "src_seed_mem_pattern", Sub(TENSOR2D)),
        (24, "identity_mem_pattern", Sub(TENSOR1D)), (32, "identity_dtype", DTYPE),
        (33, "mode", EnumByte(SeedMode)), (34, "num_active_rows", U8), (35, "num_active_cols", U8),
        (36, "dst_seed_mem_pattern", Sub(TENSOR2D)), (48, "reserved", Reserved(16))),
    Opcode.LDWEIGHTS_MX: _s(
        "SMX1_LW", (12, "reserved0", Reserved(4)), (16, "src_mem_pattern", Sub(MXMEM_PATTERN1D)),
        (32, "in_dtype", DTYPE), (33, "reserved_scale", Reserved(1)), (34, "perf_mode", EnumByte(MXPerfMode)),
        (35, "reserved1", Reserved(3)), (38, "num_active_rows", U8), (39, "num_active_cols", U8),
        (40, "reserved2", Reserved(4)), (44, "row_grp", U8), (45, "col_grp", U8),
        (46, "reserved3", Reserved(1)), (47, "flags", LD_WEIGHT_FLAGS), (48, "reserved4", Reserved(16))),
    Opcode.MATMUL_MX: _s(
        "SMX1D3_MM", (12, "reserved0", Reserved(4)), (16, "src_mem_pattern", Sub(MXMEM_PATTERN1D)),
        (32, "in_dtype", DTYPE), (33, "reserved_scale", Reserved(1)), (34, "perf_mode", EnumByte(MXPerfMode)),
        (35, "reserved1", Reserved(3)), (38, "num_active_rows", U8), (39, "num_active_cols", U8),
        (40, "out_dtype", DTYPE), (41, "reserved2", Reserved(1)), (42, "flags", MATMUL_FLAGS),
        (43, "psum_accumulate_flags", U8), (44, "row_grp", U8), (45, "col_grp", U8),
        (46, "reserved3", Reserved(1)), (47, "psum_zero_region", EnumByte(ZeroRegion)),
        (48, "dst_mem_pattern", MEM_PATTERN3D)),
}

# --- CAYMAN (NC-v3; SUNDA uses it) --------------------------------------------------------------
CAYMAN = {
    Opcode.LDWEIGHTS: _s(
        "S3_LW", (12, "reserved0", Reserved(4)), (16, "src_mem_pattern", Sub(TENSOR3D)),
        (32, "in_dtype", DTYPE), (33, "fp32_mode", EnumByte(FP32Mode)),
        (34, "transpose_mode", EnumByte(XposeMode)), (35, "perf_opt", EnumByte(PerfOpt)),
        (36, "tag_weight_mode", EnumByte(TagWeightMode)), (37, "load_order", EnumByte(LoadOrder)),
        (38, "num_active_rows", U8), (39, "num_active_cols", U8), (40, "reserved1", Reserved(4)),
        (44, "row_grp", U8), (45, "col_grp", U8), (46, "reserved2", Reserved(18))),
    Opcode.MATMUL: _s(
        "S3D3_MM", (12, "reserved0", Reserved(4)), (16, "src_mem_pattern", Sub(TENSOR3D)),
        (32, "in_dtype", DTYPE), (33, "fp32_mode", EnumByte(FP32Mode)),
        (34, "transpose_mode", EnumByte(XposeMode)), (35, "perf_opt", EnumByte(PerfOpt)),
        (36, "reserved1", Reserved(2)), (38, "num_active_rows", U8), (39, "num_active_cols", U8),
        (40, "out_dtype", DTYPE), (41, "reserved2", Reserved(2)), (43, "psum_accumulate_flags", U8),
        (44, "row_grp", U8), (45, "col_grp", U8), (46, "reserved3", Reserved(1)),
        (47, "psum_zero_region", EnumByte(ZeroRegion)), (48, "dst_mem_pattern", Sub(TENSOR3D))),
    Opcode.MATMUL_SPARSE: _s(
        "S4D3_MM", (12, "src_mem_pattern", Sub(TENSOR4D)), (32, "in_dtype", DTYPE),
        (33, "fp32_mode", EnumByte(FP32Mode)), (34, "reserved1", Reserved(4)), (38, "num_active_rows", U8),
        (39, "num_active_cols", U8), (40, "out_dtype", DTYPE), (41, "reserved2", Reserved(2)),
        (43, "psum_accumulate_flags", U8), (44, "row_grp", U8), (45, "col_grp", U8),
        (46, "reserved3", Reserved(1)), (47, "psum_zero_region", EnumByte(ZeroRegion)),
        (48, "dst_mem_pattern", Sub(TENSOR3D))),
    Opcode.LDTAGS: MARIANA[Opcode.LDTAGS],
}

# --- shared by every generation that has them (D-T17, D-T19) ----------------------------------------
PE_REG_WRITE = _s(
    "S1_PE_REG", (12, "src_mem_pattern", Sub(TENSOR1D)), (20, "reg", EnumByte(PeReg)),
    (21, "reserved0", Reserved(3)), (24, "value", U32), (28, "reserved1", Reserved(36)))
CONV_LUT_LOAD = _s(
    "S1_CONV_LUT", (12, "src_mem_pattern", Sub(TENSOR1D)), (20, "in_dtype", DTYPE),
    (21, "reserved0", Reserved(1)), (22, "num_entries", U16), (24, "reserved1", Reserved(40)))
LUT_ENTRIES = 256

for _table in (CAYMAN, MARIANA, MAVERICK):
    _table[Opcode.PE_REG_WRITE] = PE_REG_WRITE
MARIANA[Opcode.CONV_LUT_LOAD] = CONV_LUT_LOAD
MAVERICK[Opcode.CONV_LUT_LOAD] = CONV_LUT_LOAD

_BY_LAYOUT = {Gen.CAYMAN: CAYMAN, Gen.MARIANA: MARIANA, Gen.MAVERICK: MAVERICK}


def opcodes_of(gen) -> frozenset:
    """The PE opcodes a generation executes (seed 000 sections 1, 2, 5, 7, 11; D-T21)."""
    return frozenset(_BY_LAYOUT[Gen.parse(gen).layout])


def layout_of(opcode, gen):
    """The StructDef of `opcode` on `gen`; KeyError when the generation lacks the opcode."""
    return _BY_LAYOUT[Gen.parse(gen).layout][Opcode(opcode)]
