"""Validity rules for decoded descriptors (seed 000, seed 004 gates, SPEC sections 6-9).

`check` lists every violation; the engine reports `error_code(violations)`, the smallest code, so
that the model and the RTL decoder name the same error for the same bytes (SPEC D-23).  The rules of
the table in model/isa/rules.py (D-T101) are walked by `_Checker.rules`, where each family's method
used to be called."""
from __future__ import annotations

from dataclasses import dataclass

from tensore.model import addrmap
from tensore.model import dtypes as dt
from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa.enums import ErrorCode, MXPerfMode, Opcode, TagWeightMode
from tensore.model.isa.microop import MX_BLOCK, PUMP_PACK, SEED_STATES, active_cols, pack_of, transposes
from tensore.model.isa.rules import (Ints, dst_walk, elem_bytes, lut_source_ok, mx_count_ok, mx_steps_ok, reg_source_ok,
                                     seed_identity_ok, seed_source_ok, select)
from tensore.model.isa.rules import matmul_input_dtypes  # noqa: F401  (callers read it from here)
from tensore.model.isa.struct import Bits, EnumByte, Reserved, Sub, Union

E = ErrorCode


@dataclass(frozen=True)
class Violation:
    code: ErrorCode
    field: str
    message: str

    def __str__(self):
        return f"{self.code.name} ({self.code.value:#04x}) {self.detail}"

    @property
    def detail(self) -> str:
        """The field and why, without the code: `str(v)` is the code and this."""
        return f"{self.field}: {self.message}"


def error_code(violations) -> ErrorCode:
    return min((v.code for v in violations), default=ErrorCode.NONE)


_QUAD = PUMP_PACK[MXPerfMode.QUAD_ROW]    # MXTensorV2 p_f_dim: F = 2^2 packed elements x P = 2^3 partitions
MX_BLOCK_P_F_DIM = ((_QUAD.bit_length() - 1) << 4) | ((MX_BLOCK // _QUAD).bit_length() - 1)   # 0x23 (D-21)


class _Checker:
    def __init__(self, desc, stationary_dtype, array_cols=None):
        self.d, self.f, self.gen = desc, desc.fields, desc.gen
        self.array_cols = array_cols
        self.maverick = desc.gen.layout == Gen.MAVERICK
        self.stationary_dtype = stationary_dtype
        self.out: list[Violation] = []
        self.v = Ints(desc, array_cols, stationary_dtype)     # the fields for the table's rules

    def bad(self, code, field, message):
        self.out.append(Violation(code, field, message))

    def rules(self, *families, step=None):
        """The rules of `families` (of that `step`) in the table of model/isa/rules.py that the
        descriptor breaks."""
        for rule in select(families, self.d.op, self.v, step):
            if rule.fires(self.v):
                self.bad(rule.code, rule.field, rule.message(self.v))

    # -- generic structure -------------------------------------------------------------------
    def structure(self):
        self._walk(self.d.layout, self.f, "")
        self.rules("events")

    def _walk(self, sd, rec, prefix):
        for fdef in sd.fields:
            name, kind, value = prefix + fdef.name, fdef.kind, rec[fdef.name]
            if isinstance(kind, Reserved) and any(value):
                self.bad(E.RESERVED_NONZERO, name, f"reserved bytes must be zero, got {value.hex()}")
            elif isinstance(kind, EnumByte):
                if kind.enum is Dtype:
                    if not dt.is_in_enum(value, self.gen):
                        self.bad(E.BAD_DTYPE, name, f"0x{int(value):02X} is not a dtype of {self.gen.name}")
                elif not isinstance(value, kind.enum):
                    self.bad(E.BAD_ENUM, name, f"{value} is not a {kind.enum.__name__}")
            elif isinstance(kind, Bits):
                for part, width, enum_cls in kind.parts:
                    v = value[part]
                    if part == "reserved" and v:
                        self.bad(E.RESERVED_NONZERO, f"{name}.{part}", "reserved bits must be zero")
                    elif enum_cls is not None and not isinstance(v, enum_cls):
                        self.bad(E.BAD_ENUM, f"{name}.{part}", f"{v} is not a {enum_cls.__name__}")
            elif isinstance(kind, Sub):
                self._walk(kind.struct, value, name + ".")
            elif isinstance(kind, Union):
                self._walk(kind.member(value["kind"]), value, name + ".")

    # -- shared pieces -----------------------------------------------------------------------
    def pattern(self, name, memory, esize, rows=None):
        """A TENSORnD (or MEM_PATTERN3D) in `memory`: counts, window, partitions.  Returns N."""
        pat = self.f[name]
        kind = pat.get("kind", "tensor")
        if kind == "indirect16b":
            self.bad(E.UNSUPPORTED_PATTERN, name, "INDIRECT16B patterns are not executed by the PE (D-T18)")
            n = 0
        elif kind == "mxtensor_v2":
            n = self.mx_pattern(name, pat, rows)
        else:
            n = self.tensor(name, pat, memory, esize, rows)
        self.v.counts[name] = n                     # the table's v.count(name)
        return n

    def tensor(self, name, pat, memory, esize, rows):
        nums, steps = pat["num_elem"], pat["step_elem"]
        if any(n == 0 for n in nums):
            self.bad(E.BAD_PATTERN, f"{name}.num_elem", f"every count must be >= 1, got {nums}")
            return 0
        self.window(name, pat["start_addr"], memory, esize, steps, nums, rows)
        count = 1
        for n in nums:
            count *= n
        return count

    def window(self, name, addr, memory, esize, steps, nums, rows):
        loc = addrmap.locate(addr)
        if loc is None or loc.memory != memory:
            where = loc.memory.upper() if loc else "no memory"
            self.bad(E.BAD_ADDRESS, f"{name}.start_addr", f"{addr:#010x} is in {where}; must be in {memory.upper()}")
            return
        size = addrmap.sbuf_bytes(self.gen) if memory == "sbuf" else addrmap.PSUM_PARTITION_BYTES
        lo = hi = 0
        for s, n in zip(steps, nums):
            span = s * (n - 1) * esize
            lo, hi = lo + min(0, span), hi + max(0, span)
        if loc.offset + lo < 0 or loc.offset + hi + esize > size:
            self.bad(E.BAD_ADDRESS, name, f"pattern bytes {loc.offset + lo:#x}..{loc.offset + hi + esize - 1:#x}"
                     f" leave the {memory.upper()} partition (0..{size - 1:#x} on {self.gen.name})")
        if rows is not None and loc.partition + rows > addrmap.PARTITIONS:
            self.bad(E.BAD_ADDRESS, f"{name}.start_addr", f"partitions {loc.partition}..{loc.partition + rows - 1}"
                     f" run past partition {addrmap.PARTITIONS - 1}")

    def mx_pattern(self, name, pat, rows):
        self.rules("mx_dtype")
        if pat["scale_dtype"] not in (Dtype.INVALID, Dtype.SFP8_E8):
            self.bad(E.BAD_MX, f"{name}.scale_dtype", "MX scales are SFP8_E8 (E8M0), or 0 for none")
        if pat["scale_dtype"] == Dtype.SFP8_E8 and pat["p_f_dim"] != MX_BLOCK_P_F_DIM:
            self.bad(E.BAD_MX, f"{name}.p_f_dim", f"the scale block is 8 partitions x 4 elements "
                     f"(p_f_dim {MX_BLOCK_P_F_DIM:#04x}, D-21), got {pat['p_f_dim']:#04x}")
        nums = pat["num_elem"]
        if any(n == 0 for n in nums):
            self.bad(E.BAD_PATTERN, f"{name}.num_elem", f"every count must be >= 1, got {nums}")
            return 0
        self.window(name, pat["data_addr"], "sbuf", 1, [1, pat["step_elem_data_1"]], nums, rows)
        if pat["scale_dtype"] == Dtype.SFP8_E8:         # one scale byte per vector / column (D-T25)
            self.window(f"{name}.scale", pat["scale_addr"], "sbuf", 1, [1],
                        [max(1, nums[0] * nums[1] // self.pack())], rows)
        return nums[0] * nums[1]

    # -- per opcode --------------------------------------------------------------------------
    def array_op(self):
        """The rules Ldweights and Matmul share."""
        self.rules("rows_cols", "compute_dtype", "fp32_mode", "perf", "out_dtype", "accumulate")   # the last two: Matmul
        self.rules("seed_mode", "array_op")

    def ldweights(self):
        f = self.f
        self.array_op()
        self.rules("ldweights", step=0)
        tagw = f.get("tag_weight_mode", TagWeightMode.NONE) == TagWeightMode.TAG_WEIGHT
        esize = 4 if tagw else elem_bytes(f["in_dtype"])
        parts = active_cols(self.d, self.array_cols) if transposes(self.d) else f["num_active_rows"]
        self.pattern("src_mem_pattern", "sbuf", esize, rows=parts)
        self.rules("ldweights", step=1)

    def matmul(self):
        f = self.f
        self.array_op()
        self.pattern("src_mem_pattern", "sbuf", elem_bytes(f["in_dtype"]), rows=f["num_active_rows"])
        self.psum_write("seed_patterns", "transpose_destination", "matmul", "destination")

    def pack(self) -> int:
        return pack_of(self.d)

    def psum_write(self, *families):
        """A matmul's destination: the rules of `families` before its pattern is walked (step 1), the
        walk (rules.dst_walk), the rules after it (step 2) (D-T101)."""
        self.rules(*families, step=1)
        walked, esize, rows = dst_walk(self.v)
        if walked:
            self.pattern("dst_mem_pattern", "psum", esize, rows=rows)
        self.rules(*families, step=2)

    def matmul_sparse(self):
        f = self.f
        self.rules("rows_cols", "compute_dtype", "fp32_mode", "out_dtype", "accumulate", "matmul_sparse")
        self.pattern("src_mem_pattern", "sbuf", elem_bytes(f["in_dtype"]), rows=f["num_active_rows"])
        self.psum_write("destination")

    def ldtags(self):
        f = self.f
        self.rules("rows_cols", "ldtags")
        self.pattern("src_mem_pattern", "sbuf", 2, rows=f["num_active_rows"])

    def pe_manage_seed(self):
        self.rules("pe_manage_seed", step=0)
        if seed_identity_ok(self.v):
            self.pattern("identity_mem_pattern", "sbuf", elem_bytes(self.f["identity_dtype"]), rows=SEED_STATES)
        self.rules("pe_manage_seed", step=1)
        if seed_source_ok(self.v):
            self.pattern("src_seed_mem_pattern", "sbuf", 4, rows=SEED_STATES)
        self.rules("pe_manage_seed", step=2)

    def mx_op(self):
        f = self.f
        self.rules("rows_cols", "mx_dtype", "mx_op", step=0)   # MARIANA's MX scales are E8M0 (no code for it)
        pat = f["src_mem_pattern"]
        if mx_count_ok(self.v):
            self.window("src_mem_pattern", pat["data_addr"], "sbuf", 1, [pat["step_elem"]], [pat["num_elem"]],
                        f["num_active_rows"])
            self.window("src_mem_pattern.scale", pat["scale_addr"], "sbuf", 1, [1],
                        [max(1, pat["num_elem"] // self.pack())], f["num_active_rows"])
        self.rules("mx_op", step=1)
        if self.d.op == Opcode.MATMUL_MX and mx_steps_ok(self.v):
            self.rules("out_dtype", "accumulate")
            self.psum_write("destination")

    def pe_reg_write(self):
        self.rules("pe_reg_write")
        if reg_source_ok(self.v):
            self.pattern("src_mem_pattern", "sbuf", 4, rows=1)

    def conv_lut_load(self):
        f = self.f
        self.rules("conv_lut_load")
        if lut_source_ok(self.v):
            self.pattern("src_mem_pattern", "sbuf", elem_bytes(f["in_dtype"]) if dt.is_in_enum(f["in_dtype"], self.gen) else 1, rows=1)


_BY_OP = {
    Opcode.LDWEIGHTS: _Checker.ldweights, Opcode.MATMUL: _Checker.matmul,
    Opcode.MATMUL_SPARSE: _Checker.matmul_sparse, Opcode.LDTAGS: _Checker.ldtags,
    Opcode.PE_MANAGE_SEED: _Checker.pe_manage_seed, Opcode.LDWEIGHTS_MX: _Checker.mx_op,
    Opcode.MATMUL_MX: _Checker.mx_op, Opcode.PE_REG_WRITE: _Checker.pe_reg_write,
    Opcode.CONV_LUT_LOAD: _Checker.conv_lut_load,
}


def check(desc, gen=None, *, stationary_dtype=None, array_cols=None) -> list[Violation]:
    """Every violation of `desc` (a Descriptor, or 64 bytes with `gen`).

    `stationary_dtype` is the engine's loaded weight dtype, for the fp32/tf32 no-mix rule;
    `array_cols` the width of a scaled-down array (MAVERICK's num_active_cols 0 = all of them)."""
    from tensore.model.isa import Descriptor, decode
    if not isinstance(desc, Descriptor):
        desc = decode(desc, gen)
    if not isinstance(desc.op, Opcode):
        return [Violation(E.BAD_OPCODE, "header.opcode", f"0x{desc.op:02X} is not a PE opcode")]
    if desc.layout is None:
        return [Violation(E.OPCODE_NOT_IN_GEN, "header.opcode", f"{desc.op.name} does not exist on {desc.gen.name}")]
    checker = _Checker(desc, stationary_dtype, array_cols)
    checker.structure()
    _BY_OP[desc.op](checker)
    return checker.out
