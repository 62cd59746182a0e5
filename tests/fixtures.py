"""Shared test fixtures: a valid descriptor of every opcode, the rule-boundary table and descriptor
mutants (tests/test_isa.py checks model.isa with them, tests/test_rtl_decoder.py the RTL decoder's
parity), the fixed fuzz seed, and small helpers more than one test module uses."""
import numpy as np

from tensore.model.addrmap import psum_addr, sbuf_addr
from tensore.model.dtypes import Gen
from tensore.model.isa import ErrorCode, encode, opcodes_of

SEED = 20261130
E = ErrorCode

# reproducers (tests/repro/<name>.s + .npz) on which the engine RTL and the golden engine differ:
# strict xfails on the RTL (a fix turns them green), left out of the Verilator library runs
RTL_GAPS: dict[str, str] = {}


def fp32_bits(x) -> np.ndarray:
    """The bit patterns of `x` as fp32 (uint32)."""
    return np.asarray(x, np.float32).view(np.uint32)


def bank_mask(bank: int, log2: int) -> int:
    """The PSUM banks a zeroing of 2^log2 banks from `bank` clears, wrapping past bank 7 (one bit
    per bank: a PSUM partition's `zero_hits`)."""
    return sum(1 << ((bank + i) % 8) for i in range(1 << log2))


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
    # per-generation limits (D-T97)
    *[(f"double row {name}", gen, "matmul", dict(perf_opt="double_row", in_dtype="fp8_exp4", **over,
       dst_mem_pattern=dict(start_addr=psum_addr(0, 1), step_elem=[1, 0, 0], num_elem=[32, 1, 1])), code)
      for name, gen, over, code in [("on sunda", "sunda", {}, E.BAD_ENUM), ("on mariana", "mariana", {}, None),
                                    ("col_grp 1", "cayman", dict(col_grp=1, num_active_cols=96), E.BAD_TILE),
                                    ("col_grp 0, 96 cols", "cayman", dict(num_active_cols=96), None)]],
    *[(f"{f} {g} on {gen}", gen, "ldweights", {f: g, "num_active_rows": 32, "num_active_cols": 32,
                                                "src_mem_pattern": dict(start_addr=sbuf_addr(0), step_elem=[1, 0, 0],
                                                                        num_elem=[32, 1, 1])}, code)
      for f in ("row_grp", "col_grp") for g, gen, code in [(1, "sunda", E.BAD_TILE), (3, "sunda", E.BAD_TILE),
                                                           (2, "sunda", None), (1, "cayman", None), (3, "mariana", None)]],
    *[(f"{n} moving on {gen}", gen, "matmul", dict(src_mem_pattern=dict(start_addr=sbuf_addr(0, 0x100), step_elem=[1, 0, 0],
                                                                       num_elem=[n, 1, 1]),
                                                  dst_mem_pattern=dict(start_addr=psum_addr(0, 0), step_elem=[1, 0, 0],
                                                                       num_elem=[n, 1, 1])), code)
      for n, gen, code in [(512, "sunda", None), (513, "sunda", E.BAD_PATTERN), (513, "cayman", E.BAD_PATTERN),
                           (513, "mariana", None), (4096, "mariana", None), (4096, "maverick", None)]],
    *[(f"src at {gen}'s sbuf end{' + 1' if past else ''}", gen, "matmul",
       dict(src_mem_pattern=dict(start_addr=sbuf_addr(0, end - 128 + past), step_elem=[1, 0, 0], num_elem=[64, 1, 1])),
       E.BAD_ADDRESS if past else None)
      for gen, end in [("sunda", 192 << 10), ("cayman", 224 << 10), ("mariana", 256 << 10)] for past in (0, 2)
      if end - 128 + past < 256 << 10],
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


def mutants(rnd, gen, n):
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
