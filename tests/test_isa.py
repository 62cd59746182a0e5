"""model.isa: layouts (every seed offset), encode/decode, validity rules, text form, RTL layouts."""
import random

import pytest
from hypothesis import given, settings, strategies as st

from tensore.model.addrmap import psum_addr, sbuf_addr
from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa import (DESCRIPTOR_BYTES, ErrorCode, Opcode, check, decode, encode, error_code,
                       layout_of, opcodes_of)
from tensore.model.isa.asm import AsmError, assemble, disassemble
from tensore.model.isa.struct import EncodeError, walk

SEED = 20261130
GENS = list(Gen)
E = ErrorCode


def offset(op, gen, dotted):
    for off, name, kind in walk(layout_of(op, gen)):
        if name == dotted:
            return off, kind.size
    raise KeyError(dotted)


# --- every offset and size the seed gives -----------------------------------------------------

@pytest.mark.parametrize("gen", GENS, ids=[g.name for g in GENS])
def test_all_structs_are_64_bytes(gen):
    for op in opcodes_of(gen):
        assert layout_of(op, gen).size == 64, op


SEED_OFFSETS = [
    # (opcode, generation, field, offset, size) — seed 000 sections 3, 4, 5, 7, 9, 11
    (Opcode.LDWEIGHTS, Gen.MAVERICK, "header.opcode", 0, 1),
    (Opcode.LDWEIGHTS, Gen.MAVERICK, "events.wait_event", 4, 1),
    (Opcode.LDWEIGHTS, Gen.MAVERICK, "reserved0", 12, 4),
    (Opcode.LDWEIGHTS, Gen.MAVERICK, "src_mem_pattern", 16, 16),
    (Opcode.LDWEIGHTS, Gen.MAVERICK, "in_dtype", 32, 1),
    (Opcode.LDWEIGHTS, Gen.MAVERICK, "fp32_mode", 33, 1),
    (Opcode.LDWEIGHTS, Gen.MAVERICK, "num_active_rows", 34, 1),
    (Opcode.LDWEIGHTS, Gen.MAVERICK, "num_active_cols", 35, 1),
    (Opcode.LDWEIGHTS, Gen.MAVERICK, "tile_size", 36, 1),
    (Opcode.LDWEIGHTS, Gen.MAVERICK, "tile_sel", 37, 1),
    (Opcode.LDWEIGHTS, Gen.MAVERICK, "flags", 38, 1),
    (Opcode.LDWEIGHTS, Gen.MAVERICK, "perf_mode", 39, 1),
    (Opcode.LDWEIGHTS, Gen.MAVERICK, "reserved1", 40, 24),
    (Opcode.MATMUL, Gen.MAVERICK, "src_mem_pattern", 16, 16),
    (Opcode.MATMUL, Gen.MAVERICK, "in_dtype", 32, 1),
    (Opcode.MATMUL, Gen.MAVERICK, "fp32_mode", 33, 1),
    (Opcode.MATMUL, Gen.MAVERICK, "out_dtype", 34, 1),
    (Opcode.MATMUL, Gen.MAVERICK, "num_active_rows", 35, 1),
    (Opcode.MATMUL, Gen.MAVERICK, "num_active_cols", 36, 1),
    (Opcode.MATMUL, Gen.MAVERICK, "tile_size", 37, 1),
    (Opcode.MATMUL, Gen.MAVERICK, "tile_sel", 38, 1),
    (Opcode.MATMUL, Gen.MAVERICK, "flags", 39, 1),
    (Opcode.MATMUL, Gen.MAVERICK, "perf_mode", 40, 1),
    (Opcode.MATMUL, Gen.MAVERICK, "reserved1", 41, 7),
    (Opcode.MATMUL, Gen.MAVERICK, "dst_mem_pattern", 48, 16),
    (Opcode.MATMUL, Gen.MARIANA, "out_dtype", 40, 1),
    (Opcode.MATMUL, Gen.MARIANA, "flags", 42, 1),
    (Opcode.MATMUL, Gen.MARIANA, "psum_accumulate_flags", 43, 1),
    (Opcode.MATMUL, Gen.MARIANA, "row_grp", 44, 1),
    (Opcode.MATMUL, Gen.MARIANA, "col_grp", 45, 1),
    (Opcode.MATMUL, Gen.MARIANA, "psum_zero_region", 47, 1),
    (Opcode.MATMUL, Gen.CAYMAN, "psum_accumulate_flags", 43, 1),
    (Opcode.MATMUL, Gen.CAYMAN, "row_grp", 44, 1),
    (Opcode.MATMUL, Gen.CAYMAN, "col_grp", 45, 1),
    (Opcode.MATMUL, Gen.CAYMAN, "psum_zero_region", 47, 1),
    (Opcode.LDWEIGHTS, Gen.CAYMAN, "transpose_mode", 34, 1),
    (Opcode.LDWEIGHTS, Gen.CAYMAN, "perf_opt", 35, 1),
    (Opcode.LDWEIGHTS, Gen.CAYMAN, "num_active_rows", 38, 1),
    (Opcode.LDWEIGHTS, Gen.CAYMAN, "num_active_cols", 39, 1),
    (Opcode.LDWEIGHTS, Gen.CAYMAN, "row_grp", 44, 1),
    (Opcode.LDWEIGHTS, Gen.CAYMAN, "col_grp", 45, 1),
    (Opcode.LDWEIGHTS, Gen.MARIANA, "bg_xpose_mode", 12, 1),
    (Opcode.LDWEIGHTS, Gen.MARIANA, "src_mem_pattern", 16, 16),
    (Opcode.LDWEIGHTS, Gen.MARIANA, "row_grp", 44, 1),
    (Opcode.LDWEIGHTS, Gen.MARIANA, "col_grp", 45, 1),
    (Opcode.LDWEIGHTS, Gen.MARIANA, "flags", 47, 1),
    (Opcode.PE_MANAGE_SEED, Gen.MARIANA, "src_seed_mem_pattern", 12, 12),
    (Opcode.PE_MANAGE_SEED, Gen.MARIANA, "identity_mem_pattern", 24, 8),
    (Opcode.PE_MANAGE_SEED, Gen.MARIANA, "identity_dtype", 32, 1),
    (Opcode.PE_MANAGE_SEED, Gen.MARIANA, "mode", 33, 1),
    (Opcode.PE_MANAGE_SEED, Gen.MARIANA, "num_active_rows", 34, 1),
    (Opcode.PE_MANAGE_SEED, Gen.MARIANA, "num_active_cols", 35, 1),
    (Opcode.PE_MANAGE_SEED, Gen.MARIANA, "dst_seed_mem_pattern", 36, 12),
    (Opcode.PE_MANAGE_SEED, Gen.MARIANA, "reserved", 48, 16),
    (Opcode.MATMUL_SPARSE, Gen.CAYMAN, "src_mem_pattern", 12, 20),
    (Opcode.MATMUL_SPARSE, Gen.MARIANA, "src_mem_pattern", 12, 20),
    (Opcode.MATMUL_SPARSE, Gen.MAVERICK, "src_mem_pattern", 12, 20),
    (Opcode.MATMUL_SPARSE, Gen.CAYMAN, "psum_zero_region", 47, 1),
    (Opcode.MATMUL_SPARSE, Gen.CAYMAN, "dst_mem_pattern", 48, 16),
    (Opcode.MATMUL_SPARSE, Gen.MAVERICK, "dst_mem_pattern", 48, 16),
    (Opcode.LDWEIGHTS_MX, Gen.MARIANA, "src_mem_pattern", 16, 16),
    (Opcode.LDWEIGHTS_MX, Gen.MARIANA, "in_dtype", 32, 1),
    (Opcode.LDWEIGHTS_MX, Gen.MARIANA, "num_active_rows", 38, 1),
    (Opcode.LDWEIGHTS_MX, Gen.MARIANA, "num_active_cols", 39, 1),
    (Opcode.LDWEIGHTS_MX, Gen.MARIANA, "row_grp", 44, 1),
    (Opcode.LDWEIGHTS_MX, Gen.MARIANA, "col_grp", 45, 1),
    (Opcode.MATMUL_MX, Gen.MARIANA, "out_dtype", 40, 1),
    (Opcode.MATMUL_MX, Gen.MARIANA, "psum_accumulate_flags", 43, 1),
    (Opcode.MATMUL_MX, Gen.MARIANA, "psum_zero_region", 47, 1),
    (Opcode.MATMUL_MX, Gen.MARIANA, "dst_mem_pattern", 48, 16),
]


@pytest.mark.parametrize("op,gen,field,off,size", SEED_OFFSETS,
                         ids=[f"{o.name}-{g.name}-{f}" for o, g, f, _, _ in SEED_OFFSETS])
def test_seed_offsets(op, gen, field, off, size):
    found = next((o, k.size) for o, n, k in walk(layout_of(op, gen)) if n == field or n.startswith(field + "."))
    assert found[0] == off
    top = layout_of(op, gen).field(field.split(".")[0]) if "." not in field else None
    if top is not None:
        assert top.kind.size == size


def test_sub_struct_sizes_and_flag_bits():
    from tensore.model.isa import layouts as L
    assert [L.TENSOR1D.size, L.TENSOR2D.size, L.TENSOR3D.size, L.TENSOR4D.size] == [8, 12, 16, 20]
    assert L.MXTENSOR_V2.size == 16 and L.MEM_PATTERN3D.size == 16 and L.HEADER.size == 4 and L.EVENTS.size == 8
    b = encode("matmul", "maverick", flags=dict(scalar_mode=3, seed_mode=2, accumulate_flag=1, xpose_mode=1))
    assert b[39] == 0b00_1_1_10_11
    b = encode("ldweights", "maverick", flags=dict(xpose_mode=1, scalar_mode=2, seed_mode=1, load_order=1))
    assert b[38] == 0b00_1_01_10_1
    b = encode("matmul", "maverick", tile_sel=dict(row_sel=1, col_sel=1), tile_size=dict(row_size_log2="r64",
                                                                                         col_size_log2="c256"))
    assert b[38] == 0x11 and b[37] == 0x86
    assert encode("matmul", "mariana", flags=dict(accumulate_flag=1))[42] == 0x10
    assert set(opcodes_of(Gen.CAYMAN)) == {Opcode.LDWEIGHTS, Opcode.MATMUL, Opcode.PE_REG_WRITE,
                                           Opcode.LDTAGS, Opcode.MATMUL_SPARSE}
    assert opcodes_of(Gen.SUNDA) == opcodes_of(Gen.CAYMAN)
    assert opcodes_of(Gen.MARIANA_PLUS) == opcodes_of(Gen.MARIANA) == frozenset(Opcode)


def test_mx_marker_selects_union_member():
    b = encode("matmul", "maverick", src_mem_pattern=dict(kind="mxtensor_v2", data_addr=sbuf_addr(0, 0x40),
                                                          scale_addr=sbuf_addr(0, 0x1000), scale_dtype="sfp8_e8"))
    assert b[16] & 1 == 1
    d = decode(b, "maverick")
    assert d.src_mem_pattern.kind == "mxtensor_v2" and d.src_mem_pattern.data_addr == 0x40
    assert decode(b, "mariana").src_mem_pattern.kind == "tensor3d"        # MX marker is MAVERICK's
    b = encode("matmul", "maverick", src_mem_pattern=dict(kind="indirect16b", start_addr=0x80))
    assert decode(b, "maverick").src_mem_pattern.kind == "indirect16b"


# --- the valid programs every rule is tested around --------------------------------------------

def valid(op, gen, **over):
    """A valid descriptor of `op` on `gen`, with fields overridden."""
    gen = Gen.parse(gen)
    mav = gen.layout == Gen.MAVERICK
    tile = dict(tile_size=dict(row_size_log2="r128", col_size_log2="c128")) if mav else {}
    t3 = lambda addr, n: dict(start_addr=addr, step_elem=[1, 0, 0], num_elem=[n, 1, 1])  # noqa: E731
    base = {
        "ldweights": dict(in_dtype="bf16", num_active_rows=128, num_active_cols=128,
                          src_mem_pattern=t3(sbuf_addr(0, 0), 128), **tile),
        "matmul": dict(in_dtype="bf16", out_dtype="fp32", num_active_rows=128, num_active_cols=128,
                       src_mem_pattern=t3(sbuf_addr(0, 0x100), 64), dst_mem_pattern=t3(psum_addr(0, 1), 64), **tile),
        "matmul_sparse": dict(in_dtype="fp16", out_dtype="fp32", num_active_rows=64, num_active_cols=32,
                              src_mem_pattern=dict(start_addr=sbuf_addr(0), step_elem=[1, 0, 0, 16],
                                                   num_elem=[16, 1, 1, 2]),
                              dst_mem_pattern=t3(psum_addr(0, 0), 16), **tile),
        "ldtags": dict(in_dtype="uint16", num_active_rows=128, num_active_cols=128, force_tag_bits=4,
                       src_mem_pattern=t3(sbuf_addr(0), 32), **tile),
        "pe_reg_write": dict(reg="psum_round", value=1, src_mem_pattern=dict(start_addr=sbuf_addr(5, 0x10),
                                                                               step_elem=[1], num_elem=[1])),
        "pe_manage_seed": dict(mode="save_seed", num_active_rows=16, num_active_cols=128, identity_dtype="bf16",
                               identity_mem_pattern=dict(start_addr=sbuf_addr(0, 0x400), step_elem=[1], num_elem=[16]),
                               dst_seed_mem_pattern=dict(start_addr=0x0200_0000, step_elem=[1, 512], num_elem=[2, 8])),
        "ldweights_mx": dict(in_dtype="fp8_exp4", num_active_rows=128, num_active_cols=128,
                             perf_mode="quad_row", src_mem_pattern=dict(data_addr=sbuf_addr(0), scale_addr=sbuf_addr(0, 0x8000),
                                                                         step_elem=1, num_elem=512)),
        "matmul_mx": dict(in_dtype="fp8_exp5", num_active_rows=128, num_active_cols=128,
                          out_dtype="bf16", perf_mode="quad_row",
                          src_mem_pattern=dict(data_addr=sbuf_addr(0), scale_addr=sbuf_addr(0, 0x8000), step_elem=1, num_elem=64),
                          dst_mem_pattern=t3(psum_addr(0, 0), 16)),
        "conv_lut_load": dict(in_dtype="fp32", num_entries=16, src_mem_pattern=dict(start_addr=sbuf_addr(0),
                                                                                    step_elem=[1], num_elem=[16])),
    }[op]
    base.update(over)
    return encode(op, gen, **base)


OPS_BY_GEN = [(op.name.lower(), g) for g in GENS for op in sorted(opcodes_of(g))]


@pytest.mark.parametrize("op,gen", OPS_BY_GEN, ids=[f"{o}-{g.name}" for o, g in OPS_BY_GEN])
def test_reference_descriptor_is_valid_and_round_trips(op, gen):
    b = valid(op, gen)
    assert check(b, gen) == []
    text = disassemble(b, gen)
    assert assemble(text, gen) == b
    assert "error" not in text


def codes(b, gen, **ctx):
    return {v.code for v in check(b, gen, **ctx)}


# (label, gen, opcode, override, expected error code): each rule on its failing side; the passing
# side of the same boundary is the companion entry with expected None.
BOUNDARIES = [
    ("rows 0", "maverick", "matmul", dict(num_active_rows=0), E.BAD_ACTIVE_RANGE),
    ("rows 129", "mariana", "matmul", dict(num_active_rows=129), E.BAD_ACTIVE_RANGE),
    ("rows 1", "mariana", "ldweights", dict(num_active_rows=1), None),
    ("cols 0 on mariana", "mariana", "ldweights", dict(num_active_cols=0), E.BAD_ACTIVE_RANGE),
    ("cols 0 = 256 needs c256", "maverick", "ldweights", dict(num_active_cols=0), E.BAD_TILE),
    ("cols 0 = 256 with c256", "maverick", "ldweights",
     dict(num_active_cols=0, tile_size=dict(row_size_log2="r128", col_size_log2="c256"),
          src_mem_pattern=dict(start_addr=0, step_elem=[1, 0, 0], num_elem=[256, 1, 1])), None),
    ("weight tile count", "maverick", "ldweights",
     dict(src_mem_pattern=dict(start_addr=0, step_elem=[1, 0, 0], num_elem=[127, 1, 1])), E.BAD_PATTERN),
    ("row_sel 2", "maverick", "ldweights", dict(tile_sel=dict(row_sel=2)), E.BAD_TILE),
    ("row_sel 1 on r128", "maverick", "ldweights", dict(tile_sel=dict(row_sel=1)), E.BAD_TILE),
    ("row_sel 1 on r64", "maverick", "ldweights",
     dict(tile_sel=dict(row_sel=1), num_active_rows=64,
          tile_size=dict(row_size_log2="r64", col_size_log2="c128")), None),
    ("rows 65 on r64", "maverick", "ldweights",
     dict(num_active_rows=65, tile_size=dict(row_size_log2="r64", col_size_log2="c128")), E.BAD_TILE),
    ("tile_size 5", "maverick", "ldweights", dict(tile_size=dict(row_size_log2=5, col_size_log2="c128")), E.BAD_ENUM),
    ("row_grp 1 + 96 rows", "cayman", "ldweights", dict(row_grp=1, num_active_rows=96), None),
    ("row_grp 1 + 97 rows", "cayman", "ldweights", dict(row_grp=1, num_active_rows=97), E.BAD_TILE),
    ("col_grp 4", "mariana", "matmul", dict(col_grp=4, num_active_cols=1), E.BAD_TILE),
    ("in_dtype int8", "maverick", "matmul", dict(in_dtype="int8"), E.BAD_DTYPE),
    ("in_dtype fp8_exp2 on maverick", "maverick", "matmul", dict(in_dtype="fp8_exp2"), None),
    ("in_dtype 0x11 on mariana", "mariana", "matmul", dict(in_dtype=0x11), E.BAD_DTYPE),
    ("in_dtype 0x40", "cayman", "matmul", dict(in_dtype=0x40), E.BAD_DTYPE),
    ("fp32 needs a mode", "maverick", "matmul", dict(in_dtype="fp32"), E.BAD_FP32_MODE),
    ("fp32 low", "maverick", "matmul", dict(in_dtype="fp32", fp32_mode="low"), None),
    ("bf16 with a mode", "cayman", "matmul", dict(fp32_mode="high"), E.BAD_FP32_MODE),
    ("fp32_mode 4", "cayman", "matmul", dict(fp32_mode=4), E.BAD_ENUM),
    ("out bf16 on cayman", "cayman", "matmul", dict(out_dtype="bf16"), E.BAD_OUT_DTYPE),
    ("out bf16 on mariana", "mariana", "matmul", dict(out_dtype="bf16"), None),
    ("out 0 on cayman", "sunda", "matmul", dict(out_dtype=0), None),
    ("out fp16", "maverick", "matmul", dict(out_dtype="fp16"), E.BAD_OUT_DTYPE),
    ("ldweights src in psum", "maverick", "ldweights",
     dict(src_mem_pattern=dict(start_addr=psum_addr(0), step_elem=[1, 0, 0], num_elem=[8, 1, 1])), E.BAD_ADDRESS),
    ("matmul dst in sbuf", "mariana", "matmul",
     dict(dst_mem_pattern=dict(start_addr=sbuf_addr(0), step_elem=[1, 0, 0], num_elem=[64, 1, 1])), E.BAD_ADDRESS),
    ("src past the partition window", "mariana", "matmul",
     dict(src_mem_pattern=dict(start_addr=sbuf_addr(0, 0x3FFC0), step_elem=[1, 0, 0], num_elem=[64, 1, 1])), E.BAD_ADDRESS),
    ("src at the window end", "mariana", "matmul",
     dict(src_mem_pattern=dict(start_addr=sbuf_addr(0, 0x3FF80), step_elem=[1, 0, 0], num_elem=[64, 1, 1]),
          in_dtype="fp8_exp4", dst_mem_pattern=dict(start_addr=psum_addr(0, 1), step_elem=[1, 0, 0],
                                                    num_elem=[64, 1, 1])), None),
    ("src partitions past 127", "cayman", "matmul",
     dict(src_mem_pattern=dict(start_addr=sbuf_addr(1), step_elem=[1, 0, 0], num_elem=[64, 1, 1])), E.BAD_ADDRESS),
    ("count 0", "cayman", "matmul",
     dict(src_mem_pattern=dict(start_addr=sbuf_addr(0), step_elem=[1, 0, 0], num_elem=[64, 0, 1])), E.BAD_PATTERN),
    ("dst count differs", "cayman", "matmul",
     dict(dst_mem_pattern=dict(start_addr=psum_addr(0), step_elem=[1, 0, 0], num_elem=[63, 1, 1])), E.BAD_PATTERN),
    ("c256 dst upper dim 1", "maverick", "matmul",
     dict(num_active_cols=0, tile_size=dict(row_size_log2="r128", col_size_log2="c256")), E.BAD_PATTERN),
    ("c256 dst upper dim 2", "maverick", "matmul",
     dict(num_active_cols=0, tile_size=dict(row_size_log2="r128", col_size_log2="c256"),
          dst_mem_pattern=dict(start_addr=psum_addr(0, 0), step_elem=[1, 0, 512], num_elem=[64, 1, 2])), None),
    ("acc begin+begin_accum", "mariana", "matmul", dict(psum_accumulate_flags=5), E.BAD_ACCUMULATE),
    ("acc begin_accum+end", "mariana", "matmul", dict(psum_accumulate_flags=6), None),
    ("acc bit 3", "cayman", "matmul", dict(psum_accumulate_flags=8), E.BAD_ACCUMULATE),
    ("mariana accumulate_flag", "mariana", "matmul", dict(flags=dict(accumulate_flag=1)), E.BAD_ACCUMULATE),
    ("maverick accumulate_flag", "maverick", "matmul", dict(flags=dict(accumulate_flag=1)), None),
    ("zero region 4", "cayman", "matmul", dict(psum_zero_region=4), E.BAD_ENUM),
    ("reserved byte", "maverick", "matmul", dict(reserved1=1), E.RESERVED_NONZERO),
    ("reserved flag bits", "maverick", "matmul", dict(flags=dict(reserved=1)), E.RESERVED_NONZERO),
    ("header pad is ignored", "maverick", "matmul", dict(header=dict(pad=0xFFFFFF)), None),
    ("event 64", "maverick", "matmul", dict(events=dict(wait_event=64)), E.BAD_EVENT),
    ("event 63", "maverick", "matmul", dict(events=dict(wait_event=63, set_event=0)), None),
    ("double row bf16", "cayman", "matmul", dict(perf_opt="double_row"), E.BAD_DTYPE),
    ("double row fp8", "cayman", "matmul", dict(perf_opt="double_row", in_dtype="fp8_exp4",
     dst_mem_pattern=dict(start_addr=psum_addr(0, 1), step_elem=[1, 0, 0], num_elem=[32, 1, 1])), None),
    ("double row dst count", "cayman", "matmul", dict(perf_opt="double_row", in_dtype="fp8_exp4"), E.BAD_PATTERN),
    ("quad row without MX", "maverick", "matmul", dict(perf_mode="quad_row"), E.BAD_MX),
    ("transpose int32", "maverick", "matmul", dict(in_dtype="int32", flags=dict(xpose_mode=1),
     dst_mem_pattern=dict(start_addr=psum_addr(0, 1), step_elem=[1, 0, 0], num_elem=[128, 1, 1])), None),
    ("transpose dst is per row", "maverick", "matmul", dict(in_dtype="int32", flags=dict(xpose_mode=1)), E.BAD_PATTERN),
    ("transpose 32-bit into bf16", "maverick", "matmul", dict(in_dtype="int32", flags=dict(xpose_mode=1), out_dtype="bf16",
     dst_mem_pattern=dict(start_addr=psum_addr(0, 1), step_elem=[1, 0, 0], num_elem=[128, 1, 1])), E.BAD_OUT_DTYPE),
    ("transpose int64", "maverick", "matmul", dict(in_dtype="int64", flags=dict(xpose_mode=1)), E.BAD_DTYPE),
    ("lut wants uint8", "maverick", "matmul", dict(flags=dict(scalar_mode="lut")), E.BAD_LUT),
    ("lut uint8", "maverick", "matmul", dict(in_dtype="uint8", flags=dict(scalar_mode="lut")), None),
    ("indirect pattern", "maverick", "matmul",
     dict(src_mem_pattern=dict(kind="indirect16b", start_addr=sbuf_addr(0), num_elem=[64, 1])), E.UNSUPPORTED_PATTERN),
    ("bg_xpose", "mariana", "ldweights", dict(bg_xpose_mode=1), E.BAD_ENUM),
    ("seed_mode on mariana", "mariana", "ldweights", dict(flags=dict(seed_mode=1)), E.BAD_SEED_OP),
    ("tag weight with bf16", "mariana", "ldweights", dict(tag_weight_mode="tag_weight"), None),
    ("tag weight with fp8", "cayman", "ldweights", dict(tag_weight_mode="tag_weight", in_dtype="fp8_exp5"), E.BAD_SPARSE),
    ("sparse 1 fmap", "cayman", "matmul_sparse",
     dict(src_mem_pattern=dict(start_addr=0, step_elem=[1, 0, 0, 16], num_elem=[16, 1, 1, 1])), E.BAD_SPARSE),
    ("sparse 4 fmaps", "mariana", "matmul_sparse",
     dict(src_mem_pattern=dict(start_addr=0, step_elem=[1, 0, 0, 16], num_elem=[16, 1, 1, 4])), None),
    ("sparse 5 fmaps", "maverick", "matmul_sparse",
     dict(src_mem_pattern=dict(start_addr=0, step_elem=[1, 0, 0, 16], num_elem=[16, 1, 1, 5])), E.BAD_SPARSE),
    ("tags force 0x2", "cayman", "ldtags", dict(force_tag_bits=2), E.BAD_SPARSE),
    ("tags force 0xC", "maverick", "ldtags", dict(force_tag_bits=0xC), None),
    ("tags not uint16", "mariana", "ldtags", dict(in_dtype="uint8"), E.BAD_SPARSE),
    ("seed mode none", "mariana", "pe_manage_seed", dict(mode="none"), E.BAD_SEED_OP),
    ("seed rows 15", "mariana_plus", "pe_manage_seed", dict(num_active_rows=15), E.BAD_SEED_OP),
    ("seed save wrong stride", "mariana", "pe_manage_seed",
     dict(dst_seed_mem_pattern=dict(start_addr=0x0200_0000, step_elem=[1, 256], num_elem=[2, 8])), E.BAD_SEED_OP),
    ("seed reserved", "mariana", "pe_manage_seed", dict(reserved=1 << 120), E.RESERVED_NONZERO),
    ("seed load", "mariana", "pe_manage_seed",
     dict(mode="load_seed", dst_seed_mem_pattern={}, src_seed_mem_pattern=dict(start_addr=sbuf_addr(0, 0x800),
                                                                                 step_elem=[1, 0], num_elem=[128, 1])), None),
    ("seed load from partition 1", "mariana", "pe_manage_seed",
     dict(mode="load_seed", dst_seed_mem_pattern={}, src_seed_mem_pattern=dict(start_addr=sbuf_addr(1, 0x800),
                                                                                 step_elem=[1, 0], num_elem=[128, 1])), E.BAD_SEED_OP),
    ("mx bf16 element", "mariana", "matmul_mx", dict(in_dtype="bf16"), E.BAD_MX),
    ("mx int4 on mariana", "mariana", "ldweights_mx", dict(in_dtype=0x12), E.BAD_DTYPE),
    ("mx scale byte", "mariana", "ldweights_mx", dict(reserved_scale=0x13), E.RESERVED_NONZERO),
    ("maverick mx matmul", "maverick", "matmul",
     dict(in_dtype="fp4_exp2", perf_mode="quad_row",
          src_mem_pattern=dict(kind="mxtensor_v2", data_addr=sbuf_addr(0), scale_addr=sbuf_addr(0, 0x8000),
                               num_elem=[64, 1], scale_dtype="sfp8_e8", p_f_dim=0x23),
          dst_mem_pattern=dict(start_addr=psum_addr(0, 1), step_elem=[1, 0, 0], num_elem=[16, 1, 1])), None),
    ("maverick mx block", "maverick", "matmul",
     dict(in_dtype="fp4_exp2", src_mem_pattern=dict(kind="mxtensor_v2", data_addr=sbuf_addr(0), num_elem=[64, 1],
                                                    scale_dtype="sfp8_e8", p_f_dim=0x22)), E.BAD_MX),
    ("maverick mx bf16", "maverick", "ldweights",
     dict(src_mem_pattern=dict(kind="mxtensor_v2", data_addr=sbuf_addr(0), num_elem=[64, 1])), E.BAD_MX),
    ("mx fp4", "mariana", "ldweights_mx", dict(in_dtype="fp4_exp2"), None),
    ("mx indirect index", "mariana", "ldweights_mx",
     dict(src_mem_pattern=dict(data_addr=0, scale_addr=0x8000, index_addr=0x100, step_elem=1, num_elem=4)),
     E.UNSUPPORTED_PATTERN),
    ("pe reg value 2", "cayman", "pe_reg_write", dict(value=2), E.BAD_REGISTER),
    ("pe reg 7", "maverick", "pe_reg_write", dict(reg=7), E.BAD_ENUM),
    ("lut 257 entries", "mariana", "conv_lut_load", dict(num_entries=257), E.BAD_LUT),
    ("lut 256 entries", "maverick", "conv_lut_load",
     dict(num_entries=256, src_mem_pattern=dict(start_addr=0, step_elem=[1], num_elem=[256])), None),
    ("lut int8 entries", "maverick", "conv_lut_load", dict(in_dtype="int8"), E.BAD_LUT),
]


@pytest.mark.parametrize("label,gen,op,over,expect", BOUNDARIES, ids=[b[0] for b in BOUNDARIES])
def test_rule_boundaries(label, gen, op, over, expect):
    found = codes(valid(op, gen, **over), gen)
    if expect is None:
        assert found == set(), check(valid(op, gen, **over), gen)
    else:
        assert expect in found, check(valid(op, gen, **over), gen)


def test_dtype_mix_is_an_engine_context_rule():
    b = valid("matmul", "maverick", in_dtype="fp32", fp32_mode="high")
    assert codes(b, "maverick") == set()
    assert codes(b, "maverick", stationary_dtype=Dtype.BFLOAT16) == {E.DTYPE_MIX}
    assert codes(b, "maverick", stationary_dtype=Dtype.FP32) == set()
    assert codes(valid("matmul", "maverick"), "maverick", stationary_dtype=Dtype.FP8_EXP4) == set()


def test_opcode_errors_and_priority():
    assert error_code(check(bytes([0x05]) + bytes(63), "maverick")) == E.BAD_OPCODE
    assert error_code(check(bytes([0x08]) + bytes(63), "cayman")) == E.OPCODE_NOT_IN_GEN
    assert error_code(check(bytes([0x09]) + bytes(63), "maverick")) == E.OPCODE_NOT_IN_GEN
    b = bytearray(valid("matmul", "maverick", in_dtype="int8"))
    b[45] = 1                                           # also a reserved byte
    assert error_code(check(bytes(b), "maverick")) == E.RESERVED_NONZERO   # the smaller code wins


def test_encode_errors_name_the_field():
    with pytest.raises(EncodeError, match="num_active_rows: 300 does not fit"):
        encode("matmul", "maverick", num_active_rows=300)
    with pytest.raises(EncodeError, match="unknown field.*bogus"):
        encode("matmul", "maverick", bogus=1)
    with pytest.raises(EncodeError, match="does not exist on CAYMAN"):
        encode("pe_manage_seed", "cayman")
    with pytest.raises(EncodeError, match="flags.xpose_mode"):
        encode("matmul", "maverick", flags=dict(xpose_mode=2))
    with pytest.raises(ValueError, match="64 bytes"):
        decode(b"\x01" * 63, "maverick")


# --- fuzz and property tests ------------------------------------------------------------------

def _mutants(rnd, gen, n):
    """Random bytes, and valid descriptors with one to three bytes changed."""
    ops = sorted(opcodes_of(gen))
    for i in range(n):
        if i % 3 == 0:
            yield bytes(rnd.getrandbits(8) for _ in range(64))
        else:
            b = bytearray(valid(ops[i % len(ops)].name.lower(), gen))
            for _ in range(1 + i % 3):
                b[rnd.randrange(1 if i % 5 else 0, 64)] = rnd.getrandbits(8)
            yield bytes(b)


@pytest.mark.slow
@pytest.mark.parametrize("gen", GENS, ids=[g.name for g in GENS])
def test_fuzz_decode_check_never_raise(gen):
    """10^5 inputs per generation: decode and check never raise, verdicts are deterministic,
    and the text form round-trips every one of them."""
    rnd = random.Random(SEED + int(gen))
    seen = set()
    for i, data in enumerate(_mutants(rnd, gen, 100_000)):
        v = check(data, gen)
        assert check(data, gen) == v
        seen.add(error_code(v))
        if i % 20 == 0:
            assert assemble(disassemble(data, gen, annotate=False), gen) == data
    assert E.NONE in seen and len(seen) >= 6


@st.composite
def known_descriptors(draw):
    """A generation, one of its opcodes in byte 0 (header.opcode) and 63 arbitrary bytes."""
    gen = draw(st.sampled_from(GENS))
    op = draw(st.sampled_from(sorted(opcodes_of(gen))))
    return gen, bytes([int(op)]) + draw(st.binary(min_size=DESCRIPTOR_BYTES - 1, max_size=DESCRIPTOR_BYTES - 1))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(known_descriptors())
def test_property_encode_decode_round_trip(gen_data):
    """encode(decode(b)) keeps every defined field, for any bytes with an opcode of the generation."""
    gen, data = gen_data
    d = decode(data, gen)
    assert d.layout is not None and d.op == data[0]
    fields = {k: v for k, v in d.fields.items()}
    fields.pop("header")
    again = encode(d.op, gen, header=dict(pad=d.fields["header"]["pad"]), **fields)
    assert again == data


def test_text_errors_have_line_and_column():
    with pytest.raises(AsmError, match=r"prog.s:2:8: num_active_rows: 300"):
        assemble("# header\nmatmul rows=300", "maverick", source="prog.s")
    with pytest.raises(AsmError, match=r":1:8: unexpected character '@'"):
        assemble("matmul @", "maverick")
    with pytest.raises(AsmError, match=r":1:1: unknown opcode 'matmull'"):
        assemble("matmull rows=1", "maverick")
    with pytest.raises(AsmError, match=r"\.raw takes 128 hex digits"):
        assemble(".raw 0x1234", "maverick")
    with pytest.raises(AsmError, match="given twice"):
        assemble("matmul rows=1 rows=2", "maverick")


def test_rtl_layouts_match_the_model():
    from tensore.rtl.isa import descriptor_layouts
    for gen in GENS:
        for op, layout in descriptor_layouts(gen).items():
            sd = layout_of(op, gen)
            assert layout.size == DESCRIPTOR_BYTES * 8
            for f in sd.fields:
                assert layout[f.name].offset == f.offset * 8, (gen, op, f.name)


# --- fields with no valid zero (D-T64) ------------------------------------------------------------

_MAV_LW = ("ldweights in_dtype=bf16 rows=8 cols=8 {tile}src=(start_addr=sbuf(0,0), step_elem=[1,0,0], "
           "num_elem=[8,1,1])")


def test_missing_tile_size_is_an_assembly_error_with_an_example_that_works():
    import re
    with pytest.raises(AsmError) as exc:
        assemble("# a MAVERICK weight load\n" + _MAV_LW.format(tile=""), "maverick", source="p.s")
    msg = str(exc.value)
    assert msg.startswith("p.s:2:1: ldweights on MAVERICK needs tile_size (no valid zero;") and "\n" not in msg
    assert "r64, r128" in msg and "c128, c256" in msg
    example = re.search(r"e\.g\. (tile_size=\([^)]*\))", msg).group(1)
    assert check(assemble(_MAV_LW.format(tile=example + " "), "maverick"), "maverick") == []
    for op in ("matmul", "matmul_sparse", "ldtags"):                     # every MAVERICK op with a tile
        with pytest.raises(AsmError, match=f"{op} on MAVERICK needs tile_size"):
            assemble(f"{op} rows=1", "maverick")
    with pytest.raises(AsmError, match=r":1:39: ldweights on MAVERICK needs tile_size.col_size_log2 "):
        assemble(_MAV_LW.format(tile="tile_size=(row_size_log2=r64) "), "maverick")


def test_written_zero_tile_size_assembles_is_refused_and_round_trips():
    data = assemble(_MAV_LW.format(tile="tile_size=0 "), "maverick")
    assert error_code(check(data, "maverick")) == E.BAD_ENUM
    text = disassemble(data, "maverick", annotate=False)
    assert "tile_size=(row_size_log2=0, col_size_log2=0)" in text and assemble(text, "maverick") == data
    half = bytearray(data)
    half[36] = 0x70                                            # row part 0, col part c128
    text = disassemble(bytes(half), "maverick", annotate=False)
    assert "tile_size=(row_size_log2=0, col_size_log2=c128)" in text
    assert assemble(text, "maverick") == bytes(half)
    assert encode("ldweights", "maverick")[36] == 0              # the byte API writes what it is given


def test_generations_without_tile_size_need_no_tile():
    for gen in ("cayman", "mariana"):
        assert len(assemble(_MAV_LW.format(tile=""), gen)) == DESCRIPTOR_BYTES


def test_cli_asm_missing_tile_size_one_line_exit_2(tmp_path):
    import subprocess
    import sys
    (tmp_path / "p.s").write_text(_MAV_LW.format(tile="") + "\n")
    res = subprocess.run([sys.executable, "-m", "tensore.cli", "asm", str(tmp_path / "p.s"), "--gen", "maverick"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "needs tile_size" in res.stderr
