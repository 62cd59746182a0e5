"""model.isa: layouts (every seed offset), encode/decode, validity rules, text form, RTL layouts."""
import random

import pytest
from hypothesis import given, settings, strategies as st

from tensore.model.addrmap import sbuf_addr
from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa import (DESCRIPTOR_BYTES, ErrorCode, Opcode, check, decode, encode, error_code,
                       layout_of, opcodes_of)
from tensore.model.isa.asm import AsmError, assemble, disassemble
from tensore.model.isa.struct import EncodeError, walk

from tests.fixtures import BOUNDARIES, SEED, mutants, valid

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


# --- the valid programs every rule is tested around (tests/fixtures.py) ---------------------------

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

@pytest.mark.slow
@pytest.mark.parametrize("gen", GENS, ids=[g.name for g in GENS])
def test_fuzz_decode_check_never_raise(gen):
    """3 x 10^4 inputs per generation (`make regress` fuzzes 10^5 per generation through the model
    and the RTL decoder): decode and check never raise, verdicts are deterministic, and the text
    form round-trips every twentieth."""
    rnd = random.Random(SEED + int(gen))
    seen = set()
    for i, data in enumerate(mutants(rnd, gen, 30_000)):
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
