"""Validity rules for decoded descriptors (seed 000, seed 004 gates, SPEC sections 6-9).

`check` lists every violation; the engine reports `error_code(violations)`, the smallest code, so
that the model and the RTL decoder name the same error for the same bytes (SPEC D-23).  Every rule
is model/isa/rules.py's (D-T101): the rows of its table, walked by `_Checker.rules` family by
family in the order below, and the rules it makes for the layout's structure
(`rules.structure`) and for each pattern walk (`rules.walk_pattern`, `rules.mx_source`).  This
module says only in what order they are walked; which patterns are walked, with which element size
and partitions, is `rules.walk_of`."""
from __future__ import annotations

from dataclasses import dataclass

from tensore.model.isa.enums import ErrorCode, Opcode
from tensore.model.isa.rules import OPCODE, Ints, OpcodeByte, mx_source, mx_steps_ok, walk_of, walk_pattern
from tensore.model.isa.rules import MX_BLOCK_P_F_DIM, matmul_input_dtypes  # noqa: F401  (callers read them from here)

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


class _Checker:
    def __init__(self, desc, stationary_dtype, array_cols=None, v=None):
        self.d, self.f, self.gen = desc, desc.fields, desc.gen
        self.array_cols = array_cols
        self.out: list[Violation] = []
        self.v = Ints(desc, array_cols, stationary_dtype) if v is None else v     # the fields for the table's rules

    def bad(self, code, field, message):
        self.out.append(Violation(code, field, message))

    def rules(self, *families, step=None, walk=None):
        """The rules of `families` (of that `step`) in the table of model/isa/rules.py, or those of a
        pattern `walk`, that the descriptor breaks."""
        v = self.v
        for rule in v.select(families, step) if walk is None else walk:
            if rule.fires(v):
                self.bad(rule.code, rule.field, rule.message(v))

    # -- generic structure -------------------------------------------------------------------
    def structure(self):
        self.rules("structure", "events")

    # -- shared pieces -----------------------------------------------------------------------
    def pattern(self, name):
        """The TENSORnD, MEM_PATTERNnD or MXTENSOR_V2 `name`: the rules of its walk (rules.walk_pattern)
        as rules.walk_of says, where it says."""
        memory, esize, rows, when = walk_of(self.v, name)
        if when:
            walk, count = walk_pattern(self.v, name, memory, esize, rows)
            self.v.walked(name, count)                  # the table's v.count(name)
            self.rules(walk=walk)

    # -- per opcode --------------------------------------------------------------------------
    def array_op(self):
        """The rules Ldweights and Matmul share."""
        self.rules("rows_cols", "compute_dtype", "fp32_mode", "perf", "out_dtype", "accumulate")   # the last two: Matmul
        self.rules("seed_mode", "array_op")

    def ldweights(self):
        self.array_op()
        self.rules("ldweights", step=0)
        self.pattern("src_mem_pattern")
        self.rules("ldweights", step=1)

    def matmul(self):
        self.array_op()
        self.pattern("src_mem_pattern")
        self.psum_write("seed_patterns", "transpose_destination", "matmul", "destination")

    def psum_write(self, *families):
        """A matmul's destination: the rules of `families` before its pattern is walked (step 1), the
        walk (rules.walk_of), the rules after it (step 2) (D-T101)."""
        self.rules(*families, step=1)
        self.pattern("dst_mem_pattern")
        self.rules(*families, step=2)

    def matmul_sparse(self):
        self.rules("rows_cols", "compute_dtype", "fp32_mode", "out_dtype", "accumulate", "matmul_sparse")
        self.pattern("src_mem_pattern")
        self.psum_write("destination")

    def ldtags(self):
        self.rules("rows_cols", "ldtags")
        self.pattern("src_mem_pattern")

    def pe_manage_seed(self):
        self.rules("pe_manage_seed", step=0)
        self.pattern("identity_mem_pattern")
        self.rules("pe_manage_seed", step=1)
        self.pattern("src_seed_mem_pattern")
        self.rules("pe_manage_seed", step=2)

    def mx_op(self):
        self.rules("rows_cols", "mx_dtype", "mx_op", step=0)   # MARIANA's MX scales are E8M0 (no code for it)
        self.rules(walk=mx_source(self.v))
        self.rules("mx_op", step=1)
        if self.d.op == Opcode.MATMUL_MX and mx_steps_ok(self.v):
            self.rules("out_dtype", "accumulate")
            self.psum_write("destination")

    def pe_reg_write(self):
        self.rules("pe_reg_write")
        self.pattern("src_mem_pattern")

    def conv_lut_load(self):
        self.rules("conv_lut_load")
        self.pattern("src_mem_pattern")


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
    head = _Checker(desc, stationary_dtype, v=OpcodeByte(desc))       # before a layout exists
    head.rules(walk=OPCODE)
    if head.out:
        return head.out
    checker = _Checker(desc, stationary_dtype, array_cols)
    checker.structure()
    _BY_OP[desc.op](checker)
    return checker.out
